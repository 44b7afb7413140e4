#!/usr/bin/env bash
# The one device run for issue 46 (GPU decode that cannot hang), from the
# repository root on a machine with a CUDA GPU, about 5 minutes:
#   0. installs the carried wheels (.whl/*.whl, made here by
#      scripts/device_wheels.sh: stoker built with nvcc, nvidia-nvjpeg,
#      webdataset, braceexpand) into /tmp/site, without the network (~10 s);
#   1. the stall matrix, nvJPEG without stoker (bench/nvjpeg_hw_repro.py on
#      the wheel's libnvjpeg, 6 s each, a call stuck 4 s is a stall, killed
#      at 30 s; ~90 s): 3 states concurrent (as stoker ran before) against
#      serialized against 1; batch 8 against 7 (the engines); with and
#      without PreAllocate; and stoker's way now (1 state, batch 7,
#      Initialize + host sync per batch, PreAllocate);
#   2. stoker's Stall part (bench/gpu_decode.py --parts Stall --stall-runs 20):
#      S with decode="gpu" and 16 batches in flight, 20 loaders one after
#      another, where the hardware stopped returning in 6 of 6 runs before;
#      a stall is now report()["gpu_decode"]["failed"] (the watchdog), and a
#      run that still hangs leaves its stacks at 100 s (killed at 120 s);
#   3. the GPU tests: tests/python/test_gpu_decode_device.py and
#      tests/python/test_cuda.py (killed at 40 s);
#   4. the figures: bench/gpu_decode.py V, S, ResNet, 1 round (stacks at
#      110 s, killed at 130 s), JSON to $OUT/gpu_decode.json.
# Everything is also written to $OUT/log.txt. Exits 0 whatever failed, so
# the log and the JSON come back.
#
#   bash scripts/device_wheels.sh                       # here, once: fills .whl/
#   OUT=/tmp/out bash bench/device_gpu_decode.sh        # on the GPU machine
#
# On the lent device machine ($OUT is set there): carry [".whl"], command
# `bash bench/device_gpu_decode.sh`, timeout_s 420 (worst case ~10 + 180 +
# 120 + 40 + 130 s; ~300 s when nothing stalls).
set -u
OUT=${OUT:-/tmp/gpu-decode-out}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1

run() {
    date -u +"start %Y-%m-%dT%H:%M:%SZ"
    # every carried wheel: stoker's (cp312 on the device), nvidia-nvjpeg, webdataset, braceexpand
    wheels=$(ls .whl/*.whl)
    echo "installing: $wheels"
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site $wheels \
        || echo "WARNING: pip install of $wheels failed (rc=$?)"
    export PYTHONPATH=/tmp/site
    chmod +x /tmp/site/stoker/bin/* 2>/dev/null  # `stoker synth` makes the bench's images
    nvidia-smi -L
    nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader
    echo "nproc: $(nproc)"
    python3 -c 'import sys, stoker, torch, torchvision; print("python", sys.version.split()[0], "| stoker", stoker.__version__, stoker.__file__, "| torch", torch.__version__, "| torchvision", torchvision.__version__)'

    echo "== 1. stall matrix: bench/nvjpeg_hw_repro.py, nvJPEG alone (6 s each, killed at 30 s) =="
    # --lib wheel: the nvidia-nvjpeg wheel's 13.3, the one stoker now picks (the newest found).
    common=(--lib wheel --seconds 6 --stall-s 4 --images 16)
    matrix=(
        "--threads 3 --batch 8"                                          # as stoker ran before: 3 states concurrent
        "--threads 3 --batch 8 --serial"                                 # 3 states, one call at a time
        "--threads 1 --batch 8"                                          # 1 state
        "--threads 3 --batch 7"                                          # batch = the engines
        "--threads 3 --batch 8 --prealloc 2250x2250"                     # PreAllocate
        "--threads 1 --batch 7 --reinit --sync --prealloc 2250x2250"     # stoker now
    )
    i=0
    for variant in "${matrix[@]}"; do
        i=$((i + 1))
        SECONDS=0
        # shellcheck disable=SC2086
        timeout 30 python3 bench/nvjpeg_hw_repro.py "${common[@]}" $variant > "$OUT/repro-$i.txt" 2>&1
        rc=$?
        grep -E "^(config|RESULT)" "$OUT/repro-$i.txt"  # a stall's stacks, utilization and Xid lines stay in the file
        echo "matrix $i [$variant]: rc=$rc in ${SECONDS} s (full output: repro-$i.txt)"
    done

    echo "== 2. bench/gpu_decode.py --parts Stall --stall-runs 20 (stacks at 100 s, killed at 120 s) =="
    SECONDS=0
    timeout 120 python3 bench/gpu_decode.py --out "$OUT/gpu_decode_stall.json" --parts Stall --stall-runs 20 \
        --watchdog 100
    echo "stall: rc=$? in ${SECONDS} s"

    echo "== 3. GPU tests (killed at 40 s) =="
    SECONDS=0
    timeout 40 python3 -m pytest -q -rfEs -p no:cacheprovider \
        tests/python/test_gpu_decode_device.py tests/python/test_cuda.py
    echo "tests: rc=$? in ${SECONDS} s"

    echo "== 4. bench/gpu_decode.py V,S,ResNet, 1 round (stacks at 110 s, killed at 130 s) =="
    SECONDS=0
    timeout 130 python3 bench/gpu_decode.py --out "$OUT/gpu_decode.json" --rounds 1 --budget 80 --watchdog 110
    echo "bench: rc=$? in ${SECONDS} s"
    date -u +"end %Y-%m-%dT%H:%M:%SZ"
}

run 2>&1 | tee "$OUT/log.txt"
exit 0
