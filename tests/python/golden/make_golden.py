"""Regenerates the golden files of tests/python/test_golden_states.py.

    python tests/python/golden/make_golden.py

Run it ONLY when a change of behaviour is intended (a new state key, another
order, other decoded bytes), and say in the commit which change it records
and why: these files are what the rebuilt engine (issue 41) is judged
against, so rewriting them to make a failing test pass hides exactly the
difference they exist to show. It writes, with the stoker that Python
imports:
  <name>.state.json  the state each shape of test_golden_states.STATES saves
                     at its point (and stream_legacy: stream_pass's without
                     the keys older versions did not write);
  digests.json       "rest:<name>": the rest of the epoch after restoring it;
                     "epoch:<mode>": one shuffled epoch of each mode (decode_threads=1,
                     device="cpu"; the test checks the other settings equal it).
Each state is saved and each rest digested twice, the second time with
prefetch=1 (and decode_threads=4), and any difference is an error: a golden
must not depend on timing.
"""
from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

import test_golden_states as g  # noqa: E402


def write(name: str, obj) -> None:
    (HERE / name).write_text(json.dumps(obj, indent=1, sort_keys=True) + "\n")
    print("wrote", HERE / name)


def variant(name: str) -> dict:
    """Other settings for the second run, which must not change a golden."""
    return {"prefetch": 1} if name.startswith("tokens") else {"prefetch": 1, "decode_threads": 4}


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        data = g.make_data(Path(tmp))
        states, digests = {}, {}
        for name in sorted(g.STATES):
            state = g.saved_state(name, data)
            if g.saved_state(name, data, **variant(name)) != state:
                raise SystemExit(f"{name}: the saved state differs with {variant(name)}")
            states[name] = state
        for name, (base, drop) in g.LEGACY.items():
            states[name] = g.legacy_state(states[base], drop)
        for name, state in states.items():
            rest = g.rest(name, data, state)
            if g.rest(name, data, state, **variant(name)) != rest:
                raise SystemExit(f"{name}: the restored rest differs with {variant(name)}")
            digests[f"rest:{name}"] = rest
        for mode in ("indexed", "stream"):
            epoch = g.epoch_digest(mode, data, decode_threads=1, device="cpu")
            if g.epoch_digest(mode, data, decode_threads=4, device="cpu") != epoch:
                raise SystemExit(f"{mode}: the epoch differs between decode_threads 1 and 4")
            digests[f"epoch:{mode}"] = epoch
        for name, state in states.items():
            write(f"{name}.state.json", state)
        write("digests.json", digests)


if __name__ == "__main__":
    main()
