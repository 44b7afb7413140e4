#!/usr/bin/env bash
# The benchmark suite in one command (see bench/README.md, ../shared/BENCHMARKS.md):
#   bash bench/run.sh            # V, S, A against the peers and the limits: < 15 min on 2 cores
#   bash bench/run.sh --quick    # V and A, small data, fixed settings: < 2 min
#   bash bench/run.sh --remote [--quick]  # V over HTTP (nginx + 20 ms/request proxy) vs DataLoader+webdataset pipe:curl and stoker local
#   bash bench/run.sh --peers [--quick]   # V eval + train vs litdata, Mosaic Streaming, HF datasets, Ray Data, Megatron-Energon
#   bash bench/run.sh --autotune [--quick]  # no knobs vs the best of 12 hand settings, 6 scenarios (bench/autotune.py)
#   bash bench/run.sh --ray [--quick]      # a trainer on 1 core + a Ray worker node on the other vs alone, vs Ray Data (bench/ray_workers.py): < 8 min, --quick < 2
#   bash bench/run.sh --doctor             # the doctor's pick vs the best of a 27-setting grid it never saw (bench/doctor_grid.py): ~5 min
#   bash bench/run.sh --mix [--quick]      # three sources by 0.5/0.3/0.2 (one over HTTP +20 ms): stoker.mix vs one source, webdataset RandomMix, Mosaic Streaming streams, litdata CombinedStreamingDataset (bench/mix.py)
#   bash bench/run.sh --scale [--quick]    # a rank's memory + time to first batch at 200k and 2M samples vs Mosaic Streaming, webdataset (bench/scale.py): < 10 min, --quick < 3
#   bash bench/run.sh --map [--quick]      # V with a user's map= (numpy augmentation + tokenizers; pure Python) vs DataLoader + webdataset running it (bench/map.py): ~4 min
# Installs the peers from requirements-bench.txt (torch stays pinned), builds the stoker
# command if needed, makes the data once under bench/data/, writes bench/results/<UTC>.{json,md,png}.
# Exits 0 whatever the speed; non-zero only if something crashes.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
PY=${PYTHON:-python3}
# A development tree (native module linked into python/stoker) wins over the
# installed package; a clean checkout uses what scripts/setup.sh installed.
if compgen -G "python/stoker/_stoker*.so" >/dev/null; then
  export PYTHONPATH="$ROOT/python${PYTHONPATH:+:$PYTHONPATH}"
fi

if [[ "${STOKER_BENCH_SKIP_INSTALL:-0}" != 1 ]]; then
  # torch must not move: pin it to what is installed through a constraint file.
  cons=$(mktemp)
  trap 'rm -f "$cons"' EXIT
  "$PY" -c 'import torch; print("torch==" + torch.__version__.split("+")[0])' > "$cons" 2>/dev/null || echo "torch==2.13.0" > "$cons"
  if ! "$PY" - <<'PYEOF' 2>/dev/null
import importlib.util as u, sys
sys.exit(0 if all(u.find_spec(m) for m in ("webdataset", "PIL", "matplotlib", "spdl", "nvidia.dali", "psutil",
                                            "litdata", "streaming", "datasets", "pyarrow", "ray", "megatron.energon")) else 1)
PYEOF
  then
    echo "bench/run.sh: installing the peers (requirements-bench.txt)"
    had_tv=$("$PY" -c 'import importlib.util as u; print(int(u.find_spec("torchvision") is not None))' 2>/dev/null || echo 1)
    "$PY" -m pip install -q -r requirements-bench.txt -c "$cons" || echo "bench/run.sh: some peers did not install; the suite reports which cannot run"
    # litdata and mosaicml-streaming depend on torchvision; PyPI's is a CUDA build that fails to
    # load beside CPU torch and then breaks `import litdata`. Remove it when this step brought it.
    if [[ $had_tv == 0 ]] && ! "$PY" -c 'import torchvision' >/dev/null 2>&1; then
      echo "bench/run.sh: removing the torchvision the peers pulled (it does not load beside torch $(cut -d= -f3 "$cons"))"
      "$PY" -m pip uninstall -y -q torchvision || true
    fi
  fi
  # SPDL's own image decode needs FFmpeg's shared libraries; Debian 12 has FFmpeg 5.
  if ! "$PY" -c 'import spdl.io.lib as l; l._import_libspdl()' >/dev/null 2>&1; then
    if [[ $(id -u) == 0 ]] && command -v apt-get >/dev/null; then
      echo "bench/run.sh: installing FFmpeg libraries for spdl.io (apt)"
      apt-get install -y -qq --no-install-recommends libavfilter8 libavformat59 libavcodec59 libavutil57 \
        libswscale6 libswresample4 libavdevice59 >/dev/null 2>&1 || echo "bench/run.sh: FFmpeg libraries unavailable: SPDL decodes with Pillow"
    fi
  fi
fi

# the native module and the stoker command
if ! "$PY" -c 'import stoker, os, stoker._cli as c; assert os.path.exists(c.binary())' >/dev/null 2>&1; then
  if [[ -d build/py ]] && [[ -n "${PYTHONPATH:-}" ]]; then cmake --build build/py; else bash scripts/setup.sh; fi
fi

if [[ "${1:-}" == --autotune ]]; then shift; exec "$PY" bench/autotune.py "$@"; fi
if [[ "${1:-}" == --scale ]]; then shift; exec "$PY" bench/scale.py "$@"; fi
if [[ "${1:-}" == --mix ]]; then shift; exec "$PY" bench/mix.py "$@"; fi
if [[ "${1:-}" == --map ]]; then shift; exec "$PY" bench/map.py --out "bench/results/$(date -u +%Y-%m-%dT%H%MZ)-map.json" "$@"; fi
if [[ "${1:-}" == --doctor ]]; then shift; exec "$PY" bench/doctor_grid.py "$@"; fi
if [[ "${1:-}" == --ray ]]; then
  shift; exec "$PY" bench/ray_workers.py --out "bench/results/$(date -u +%Y-%m-%dT%H%MZ)-ray.md" "$@"
fi
exec "$PY" bench/suite.py "$@"
