"""`stoker` on PATH: `stoker report` runs here in Python (it draws HTML from a
run's JSON lines), and so does `stoker pack-tokens --tokenizer` (Hugging
Face's tokenizers are a Rust library with no C++ API: stoker/pack_text.py);
every other subcommand runs the native command installed inside the package."""
import os
import sys


def binary() -> str:
    return os.path.join(os.path.dirname(__file__), "bin", "stoker")


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "report":
        from .report import main as report_main

        sys.exit(report_main(sys.argv[2:]))
    if len(sys.argv) > 1 and sys.argv[1] == "pack-tokens" and any(
            a == "--tokenizer" or a.startswith("--tokenizer=") for a in sys.argv[2:]):
        from .pack_text import main as pack_text_main

        sys.exit(pack_text_main(sys.argv[2:]))
    path = binary()
    if not os.path.exists(path):
        sys.exit(f"stoker: the native command is missing at {path}; reinstall with `pip install .`")
    # Parquet sources: the native command loads the plugin for this Python's
    # pyarrow, found without importing it (stoker/_parquet.py).
    from ._parquet import ENV, unimported_dir

    if not os.environ.get(ENV):
        arrow_dir = unimported_dir()
        if arrow_dir:
            os.environ[ENV] = arrow_dir
    os.execv(path, [path, *sys.argv[1:]])
