#!/usr/bin/env bash
# Every test, from a fresh machine: set-up, the C++ suite (GoogleTest via
# ctest), then the Python suite against the installed package.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh

jobs=$(nproc)
cmake -S . -B build/test -G Ninja -DCMAKE_BUILD_TYPE=Release -DSTOKER_BUILD_TESTS=ON -DSTOKER_BUILD_CLI=ON
cmake --build build/test -j "$jobs"
ctest --test-dir build/test --output-on-failure -j "$jobs"

# The tests import the installed package, not the source tree.
STOKER_BIN="$(python3 -c 'import stoker._cli as c; print(c.binary())')" \
  python3 -m pytest -q -p no:cacheprovider tests/python "$@"
