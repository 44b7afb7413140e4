#!/usr/bin/env bash
# Every test, from a fresh machine: set-up, the C++ suite (GoogleTest via
# ctest), then the Python suite against the installed package.
set -euo pipefail
cd "$(dirname "$0")/.."
# Where the time goes: each phase's end, in seconds from the start.
t0=$SECONDS
mark() { echo "test.sh: $1 done at $((SECONDS - t0)) s"; }
bash scripts/setup.sh
mark setup

jobs=$(nproc)
export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$PWD}  # as setup.sh hashes the library's objects
# The sanitizer trees compile with line tables (-g), for which ccache also hashes
# the build folder unless told not to: a fresh clone elsewhere then missed
# every object. Their debug info names the source files relative to the
# checkout (CCACHE_BASEDIR), so a stack trace still reads file:line.
export CCACHE_NOHASHDIR=${CCACHE_NOHASHDIR:-1}
# The library's objects come from ccache, filled by setup.sh's wheel build
# with the same compiler and flags; the command line is the wheel's own (pytest runs it).
# The compiler is named through CXX, which only a new build directory takes:
# -DCMAKE_CXX_COMPILER on one configured with another would wipe its cache,
# and the -D settings below with it.
# Python_EXECUTABLE: the Python whose pyarrow provides Arrow for Parquet sources (CMakeLists.txt)
CXX=${CXX:-g++} cmake -S . -B build/test -G Ninja -DCMAKE_BUILD_TYPE=Release -DSTOKER_BUILD_TESTS=ON \
  -DSTOKER_BUILD_CLI=OFF -DCMAKE_CXX_COMPILER_LAUNCHER="${CMAKE_CXX_COMPILER_LAUNCHER:-ccache}" \
  -DPython_EXECUTABLE="$(command -v python3)"
cmake --build build/test -j "$jobs"
mark "test build"

# Interop fixtures written by the peers themselves (Python's tarfile, numpy,
# Pillow) for the C++ tests to read; then Python reads back what C++ wrote.
fixtures=build/test/fixtures
rm -rf "$fixtures" && mkdir -p "$fixtures/formats" "$fixtures/pillow"
python3 tests/cpp/formats/make_fixtures.py generate "$fixtures/formats"
python3 tests/cpp/codecs/make_pillow_fixtures.py "$fixtures/pillow"
STOKER_FIXTURES="$PWD/$fixtures/formats" STOKER_PILLOW_FIXTURE_DIR="$PWD/$fixtures/pillow" \
  ctest --test-dir build/test --output-on-failure -j "$jobs"
python3 tests/cpp/formats/make_fixtures.py verify "$fixtures/formats"
mark ctest

# The same suite under ASan+UBSan, and the threaded tests under TSan.
bash scripts/sanitize.sh
mark sanitizers

# A short libFuzzer run per parser (ASan+UBSan, clang), replaying every kept
# regression input first; the long run is `bash scripts/fuzz.sh 3600`.
bash scripts/fuzz.sh "${STOKER_FUZZ_SECONDS:-10}"
mark fuzz

# The release's short form: wheels for Python 3.9 and 3.13, each installed in
# fresh venvs (without pyarrow, with numpy 1.x, the newest pyarrow, pyarrow 25)
# that import stoker, load a tar shard and read Parquet; the full form is
# `bash scripts/release.sh`. Only when the files that make the wheel changed
# since it last passed (scripts/release.stamp): it builds two more wheels.
bash scripts/release.sh --short --if-changed
mark release

# The documentation site, strictly: a broken link or anchor, a page left out of
# mkdocs.yml's nav, or an API name mkdocstrings cannot find fails here (the pages'
# code blocks run in tests/python/test_docs_blocks.py).
NO_MKDOCS_2_WARNING=1 python3 -m mkdocs build --strict -q -d build/site
mark docs

# The tests import the installed package, not the source tree. -rs lists
# every skip with its reason, and a reason outside conftest.py's ALLOWED_SKIPS
# fails the run (STOKER_STRICT_SKIPS). -p no:randomly keeps file order here;
# `bash scripts/test_shuffled.sh` runs the same suite in a shuffled order, in
# one process. The files run on cores + 1 pytest-xdist workers (at most 8), a
# file to a worker (--dist loadfile: a module's servers and fixtures stay in one
# process): many tests wait on servers, back-offs and child processes, so on 2
# cores 3 workers took 340 s where one took 700 s. STOKER_TEST_WORKERS=0 runs
# them in this process.
workers=${STOKER_TEST_WORKERS:-$(( jobs + 1 < 8 ? jobs + 1 : 8 ))}
parallel=()
[ "$workers" -gt 0 ] && parallel=(-n "$workers" --dist loadfile)
STOKER_STRICT_SKIPS=1 STOKER_BIN="$(python3 -c 'import stoker._cli as c; print(c.binary())')" \
  python3 -m pytest -q -rs -p no:cacheprovider -p no:randomly -p no:benchmark "${parallel[@]}" tests/python "$@"
mark pytest
