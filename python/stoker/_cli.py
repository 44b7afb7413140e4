"""`stoker` on PATH: runs the native command installed inside the package."""
import os
import sys


def binary() -> str:
    return os.path.join(os.path.dirname(__file__), "bin", "stoker")


def main() -> None:
    path = binary()
    if not os.path.exists(path):
        sys.exit(f"stoker: the native command is missing at {path}; reinstall with `pip install .`")
    os.execv(path, [path, *sys.argv[1:]])
