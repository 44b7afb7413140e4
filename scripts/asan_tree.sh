# Sourced by scripts/sanitize.sh and scripts/fuzz.sh: configures build/asan,
# the one clang tree of AddressSanitizer + UndefinedBehaviorSanitizer that
# both the GoogleTest binaries and the libFuzzer targets are built in (the
# coverage of fuzzer-no-link costs the tests little; a second tree cost the
# test command a whole library compile). -O1 and line tables only: the usual
# sanitizer build, symbolized stacks with line numbers, quick to compile.
# Through ccache, so a rerun compiles only what changed.
asan_build=build/asan
asan_flags="-fsanitize=address,undefined,fuzzer-no-link -fno-sanitize-recover=undefined -fno-omit-frame-pointer"
asan_flags+=" -gline-tables-only"
configure_asan_tree() {
  cmake -S . -B "$asan_build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_COMPILER=clang++ \
    -DCMAKE_CXX_COMPILER_LAUNCHER="${CMAKE_CXX_COMPILER_LAUNCHER:-ccache}" \
    -DCMAKE_CXX_FLAGS_RELEASE="-O1" -DCMAKE_CXX_FLAGS="$asan_flags" -DSTOKER_BUILD_TESTS=ON -DSTOKER_BUILD_FUZZ=ON \
    -DSTOKER_BUILD_CLI=OFF -DSTOKER_BUILD_PYTHON=OFF -DSTOKER_CUDA_KERNELS=OFF >/dev/null
}
