#!/usr/bin/env bash
# libFuzzer over the parsers (tar reader, sidecar index, NPY, ZIP/NPZ, JPEG
# wrapper, the fast PNG path against libspng, the Megatron .idx, the text/JSON
# and msgpack checks, .gz members against zlib), built with clang and AddressSanitizer + UndefinedBehaviorSanitizer.
#
#   bash scripts/fuzz.sh            # 15 s per target (scripts/test.sh runs 10)
#   bash scripts/fuzz.sh 3600       # the long run: an hour per target
#   bash scripts/fuzz.sh 60 jpeg    # one target
#
# First every kept regression input (tests/fuzz/regressions/<parser>/) is
# replayed, then each target fuzzes from the committed seeds
# (tests/fuzz/corpus/<parser>/, written by tests/fuzz/make_corpus.py) plus
# what earlier runs found (build/asan/corpus/<parser>/). A crash stops the
# script; its input is in build/asan/crashes/<parser>/: fix the parser, then
# keep the input under tests/fuzz/regressions/<parser>/.
set -euo pipefail
cd "$(dirname "$0")/.."

secs=${1:-15}
shift || true
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(tar sample_index dataset_manifest npy zip jpeg compressed png_fast megatron_index text_check
                                        msgpack_check gzip_member)

SUDO=""
[ "$(id -u)" = 0 ] || SUDO="sudo"
if ! command -v clang++ >/dev/null || ! ls /usr/lib/llvm-*/lib/clang/*/lib/linux/libclang_rt.fuzzer-x86_64.a >/dev/null 2>&1; then
  $SUDO apt-get update -q
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends clang libclang-rt-14-dev llvm
fi

# The targets are built in scripts/sanitize.sh's ASan tree (scripts/asan_tree.sh).
source scripts/asan_tree.sh
build=$asan_build
configure_asan_tree
cmake --build "$build" -j "$(nproc)" --target "${targets[@]/#/fuzz_}"

export ASAN_OPTIONS=${ASAN_OPTIONS:-abort_on_error=1:detect_leaks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
for t in "${targets[@]}"; do
  bin="$build/fuzz_$t"
  log="$build/fuzz_$t.log"
  regressions=(tests/fuzz/regressions/"$t"/*)
  if [ -e "${regressions[0]}" ]; then
    echo "== $t: replaying ${#regressions[@]} regression inputs"
    if ! "$bin" -runs=1 "${regressions[@]}" >"$log" 2>&1; then
      tail -n 40 "$log"; echo "fuzz_$t: a regression input fails again"; exit 1
    fi
  fi
  mkdir -p "$build/corpus/$t" "$build/crashes/$t"
  echo "== $t: fuzzing ${secs}s"
  if ! "$bin" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -max_len=65536 \
      -artifact_prefix="$build/crashes/$t/" "$build/corpus/$t" "tests/fuzz/corpus/$t" >"$log" 2>&1; then
    tail -n 60 "$log"; echo "fuzz_$t found a crash: see $build/crashes/$t/"; exit 1
  fi
  grep -E "^#[0-9]+.*DONE|Done [0-9]+ runs" "$log" | tail -n 1 || tail -n 1 "$log"
done
echo "fuzz: ${#targets[@]} targets clean (${secs}s each)"
