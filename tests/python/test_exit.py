"""A script that ends with a loader still open exits quietly and at once:
no nanobind "leaked instances" report, no abort, exit status 0 (python/stoker/_exit.py)."""
from __future__ import annotations

import subprocess
import sys
import textwrap

from conftest import stoker_env


def run_script(body: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(body)], capture_output=True, text=True,
                          timeout=120, env=stoker_env())


def test_a_loader_left_open_mid_epoch_is_stopped_at_exit(vision_dir):
    directory, _ = vision_dir
    proc = run_script(f"""
        import stoker
        loader = stoker.Loader("{directory}/*.tar", {{"jpg": stoker.image(32)}}, batch_size=4, shuffle=True)
        it = iter(loader)
        batch = next(it)
        assert batch["jpg"].shape[0] == 4
    """)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == "", proc.stderr


def test_a_daemon_thread_still_iterating_at_exit_leaves_no_leak_report(vision_dir):
    """The daemon thread is frozen inside the loop by the interpreter, so what
    it holds is never freed: that is not a leak of stoker's, and nothing is printed."""
    directory, _ = vision_dir
    proc = run_script(f"""
        import threading, time
        import stoker
        loader = stoker.Loader("{directory}/*.tar", {{"jpg": stoker.image(32)}}, batch_size=4, shuffle=True)
        started = threading.Event()
        def train():
            while True:
                for batch in loader:
                    started.set()
                    time.sleep(0.005)
        threading.Thread(target=train, daemon=True).start()
        assert started.wait(60)
    """)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == "", proc.stderr
