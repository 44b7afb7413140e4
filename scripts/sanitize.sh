#!/usr/bin/env bash
# The C++ suite under sanitizers (clang from Debian):
#   build/asan: every GoogleTest binary with AddressSanitizer + UndefinedBehaviorSanitizer;
#   build/tsan: the threaded tests (buffer pool, shard files, mapped reads and
#               their fault guard, the loader's threads end to end, over HTTP
#               too, cancelled remote reads, device copies on the late CPU engine,
#               short and empty exact batches, GPU decode's stand-in and its
#               hardware worker's watchdog) with ThreadSanitizer.
# Any finding fails the run (halt_on_error). scripts/test.sh runs both.
# -O1 and line tables only: the usual sanitizer build (symbolized stacks with
# line numbers), quicker to compile than -O3 -g, so the test command that runs
# it stays well under 20 minutes on 2 cores.
#   bash scripts/sanitize.sh          # both
#   bash scripts/sanitize.sh asan     # one of them
set -euo pipefail
cd "$(dirname "$0")/.."
modes=("$@")
[ ${#modes[@]} -gt 0 ] || modes=(asan tsan)

SUDO=""
[ "$(id -u)" = 0 ] || SUDO="sudo"
if ! command -v clang++ >/dev/null; then
  $SUDO apt-get update -q
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends clang libclang-rt-14-dev llvm
fi
jobs=$(nproc)
source scripts/asan_tree.sh

for mode in "${modes[@]}"; do
  case "$mode" in
    asan)
      targets=(all)  # the tests; the fuzz targets in the same tree are scripts/fuzz.sh's
      select="."
      ;;
    tsan)
      flags="-fsanitize=thread -fno-omit-frame-pointer -gline-tables-only"
      targets=(test_core_buffer_pool_test test_pipeline_shard_files_test test_io_mapped_reader_test
               test_pipeline_loader_reliability_test test_io_cancel_test test_pipeline_remote_run_test
               test_device_late_copy_engine_test test_pipeline_device_loader_test
               test_pipeline_exact_partition_test test_pipeline_gpu_decode_loader_test
               test_pipeline_shard_index_cache_test test_core_ordered_queue_test test_pipeline_tuned_run_test test_device_hardware_batcher_test)
      select="BufferPool|ShardFiles|MappedReader|LoaderReliability|Cancellation|RemoteRun"
      select+="|LateCopyEngine|DeviceLoader|ExactPartition|GpuDecodeLoader|ShardIndexCache|OrderedQueue|HardwareBatcher|TunedRun"
      ;;
    *) echo "unknown mode $mode (asan, tsan)"; exit 2 ;;
  esac
  build=build/$mode
  # Without the GPU kernels (scripts/test.sh's build has them where nvcc is).
  if [ "$mode" = asan ]; then
    build=$asan_build
    configure_asan_tree
  else
    cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_COMPILER=clang++ \
      -DCMAKE_CXX_COMPILER_LAUNCHER="${CMAKE_CXX_COMPILER_LAUNCHER:-ccache}" \
      -DCMAKE_CXX_FLAGS_RELEASE="-O1" -DCMAKE_CXX_FLAGS="$flags" -DSTOKER_BUILD_TESTS=ON -DSTOKER_BUILD_CLI=OFF \
      -DSTOKER_BUILD_PYTHON=OFF -DSTOKER_CUDA_KERNELS=OFF >/dev/null
  fi
  if [ ${#targets[@]} -gt 0 ]; then
    cmake --build "$build" -j "$jobs" --target "${targets[@]}"
  else
    cmake --build "$build" -j "$jobs"
  fi
  fixtures=$build/fixtures
  rm -rf "$fixtures" && mkdir -p "$fixtures/formats" "$fixtures/pillow"
  python3 tests/cpp/formats/make_fixtures.py generate "$fixtures/formats"
  python3 tests/cpp/codecs/make_pillow_fixtures.py "$fixtures/pillow"
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 \
  STOKER_FIXTURES="$PWD/$fixtures/formats" STOKER_PILLOW_FIXTURE_DIR="$PWD/$fixtures/pillow" \
    ctest --test-dir "$build" --output-on-failure -j "$jobs" -R "$select"
  echo "sanitize: $mode clean"
done
