#!/usr/bin/env bash
# The Python suite in a shuffled order (pytest-randomly: modules, then the
# tests within each), to prove no test depends on which ran before it.
#
#   bash scripts/test_shuffled.sh                 # a fresh seed, printed at the top
#   bash scripts/test_shuffled.sh --randomly-seed=1234   # replay one order
#   taskset -c 0 bash scripts/test_shuffled.sh    # the same on one core
#
# Extra arguments go to pytest. Needs the package installed (scripts/setup.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
STOKER_STRICT_SKIPS=1 STOKER_BIN="$(python3 -c 'import stoker._cli as c; print(c.binary())')" \
  python3 -m pytest -q -rs -p no:cacheprovider -p randomly tests/python "$@"
