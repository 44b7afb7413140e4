#!/usr/bin/env bash
# The main job on a new machine: set-up, then the SA-1B-style training loop on
# a synthesized default dataset (written to data/sa1b on the first run).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
python3 examples/train_sa1b.py "$@"
