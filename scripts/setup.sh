#!/usr/bin/env bash
# Installs every system and Python dependency stoker needs on a fresh Debian
# machine, then builds and installs the package (`pip install .`). Idempotent.
set -euo pipefail
cd "$(dirname "$0")/.."

SUDO=""
[ "$(id -u)" = 0 ] || SUDO="sudo"

apt_packages=(
  g++ cmake ninja-build pkg-config
  libturbojpeg0-dev      # JPEG decode/encode (TurboJPEG API)
  libjpeg62-turbo-dev    # the libjpeg API of libjpeg-turbo: region decode
  libyuv-dev             # SIMD plane scaling and YUV->RGB conversion
  libdeflate-dev         # NPZ (deflate) decode and encode
  libspng-dev            # PNG decode (image fields)
  libwebp-dev            # WebP decode (image fields)
  zlib1g-dev             # .tar.gz shards: restartable inflate (io/gzip_reader.cc)
  libzstd-dev            # .tar.zst shards: streaming decompression (io/zstd_reader.cc)
  zstd                   # tests/python/test_compressed_shards.py writes .tar.zst with it
  libcli11-dev           # the `stoker` command line
  nlohmann-json3-dev     # index files, --json output
  libcurl4-openssl-dev   # io/: HTTP(S) and S3 readers (ranged GETs, connection reuse, built-in AWS SigV4)
  nginx                  # tests/bench: a real HTTP server with range support behind tests/python/fault_proxy.py
  libgtest-dev           # C++ unit tests
  chromium               # headless: tests/python/test_report.py checks what `stoker report` renders
  clang libclang-rt-14-dev llvm  # libFuzzer + ASan/UBSan/TSan: scripts/fuzz.sh (short run in test.sh), scripts/sanitize.sh
  ccache                 # the wheel's compiled library is reused by scripts/test.sh's build (same flags)
)
missing=()
for p in "${apt_packages[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  $SUDO apt-get update -q
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

PY=${PYTHON:-python3}
# torch is pinned: 2.13.0 is the CPU build this project is tested against.
$PY -m pip install -q -r requirements-dev.txt
# megatron-core is the reference of the token tests and bench: 0.16.1 is the
# newest for Python 3.11 and its wheel carries the compiled helpers_cpp;
# --no-deps keeps torch at its pin (its dataset code needs numpy, torch, packaging).
$PY -m pip install -q --no-deps megatron-core==0.16.1 packaging
# Through ccache, and with the compiler named as scripts/test.sh names it
# (ccache keys on the name: c++ and g++ miss each other): its build then
# compiles only the tests, not the library again.
# CCACHE_BASEDIR: paths under the checkout are hashed relative to the build
# directory, so scripts/release.sh's wheels (build/rel-<tag>, the same depth)
# hit the same objects.
export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$PWD}
CXX=${CXX:-g++} CMAKE_CXX_COMPILER_LAUNCHER=${CMAKE_CXX_COMPILER_LAUNCHER:-ccache} \
  $PY -m pip install -q --no-build-isolation .
