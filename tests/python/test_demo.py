"""The main job (`scripts/demo.sh` runs examples/train_sa1b.py) on a small
dataset: it synthesizes its data, trains, and each epoch's line carries the
library's own judgement (efficiency, p99 wait, and either "healthy" or the
bottleneck with a recommendation), not a verdict written in the example."""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from conftest import stoker_env

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "train_sa1b.py"
BOTTLENECKS = "consumer|storage|decode|pipeline|consumer-side|h2d|cpu contention|input|unknown"  # BottleneckName


def test_demo_epochs_speak_through_the_library(tmp_path):
    proc = subprocess.run([sys.executable, str(EXAMPLE), "--data", str(tmp_path / "sa1b"), "--count", "48",
                           "--epochs", "2", "--batch-size", "8", "--size", "128"],
                          env=stoker_env(), capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "48 samples in" in proc.stdout, proc.stdout
    epochs = [line for line in proc.stdout.splitlines() if line.startswith("epoch ")]
    assert len(epochs) == 2, proc.stdout
    for line in epochs:
        m = re.search(r"efficiency (\d\.\d\d)  t_wait p99 [\d.]+ ms  t_compute [\d.]+ ms/step  -> (.*)", line)
        assert m, line
        efficiency, verdict = float(m.group(1)), m.group(2)
        assert verdict.startswith("healthy: the input keeps up") or re.match(rf"({BOTTLENECKS}): ", verdict), line
        # The library's threshold, read back from its own numbers: healthy
        # exactly when the input keeps up at efficiency >= 0.9 (the printed
        # figure is rounded, so 0.90 itself may go either way).
        if efficiency >= 0.91:
            assert verdict.startswith("healthy"), line
        elif efficiency <= 0.89:
            assert not verdict.startswith("healthy"), line
    if any("healthy" not in line for line in epochs):
        assert "recommendation: " in proc.stdout, proc.stdout
