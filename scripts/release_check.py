"""What scripts/release.sh runs in each fresh venv beside an installed stoker
wheel: import, a JPEG loader over a tar shard, and a Parquet source (read and
compared with pyarrow's own reading where pyarrow is installed; without it,
the error must name the pyarrow versions that work). Prints one JSON line:
{"import": ..., "loader": ..., "parquet": ...}, each "ok ..." or "FAIL ...".

    python release_check.py make DIR    # the inputs (needs Pillow and pyarrow): DIR/shard.tar, DIR/rows.parquet
    python release_check.py check DIR   # in the venv under test: no Pillow, pyarrow or not
"""
import importlib.util
import io
import json
import os
import sys
import tarfile
import traceback

N = 12  # samples in each input


def make(out: str) -> None:
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq
    from PIL import Image

    os.makedirs(out, exist_ok=True)
    jpegs = []
    for i in range(N):
        pixels = np.full((24, 32, 3), (i * 20, 255 - i * 20, 90), np.uint8)
        buf = io.BytesIO()
        Image.fromarray(pixels).save(buf, format="JPEG", quality=95)
        jpegs.append(buf.getvalue())
    with tarfile.open(os.path.join(out, "shard.tar"), "w") as tf:
        for i, jpg in enumerate(jpegs):
            for ext, data in (("jpg", jpg), ("cls", str(i * 3).encode())):
                info = tarfile.TarInfo(f"{i:04d}.{ext}")
                info.size = len(data)
                tf.addfile(info, io.BytesIO(data))
    table = pa.table({"jpg": pa.array(jpegs, pa.binary()), "cls": pa.array([i * 7 for i in range(N)], pa.int64())})
    pq.write_table(table, os.path.join(out, "rows.parquet"), row_group_size=5)


def first_line(e: BaseException) -> str:
    return (str(e).splitlines() or [type(e).__name__])[0][:160]


def check(data: str) -> dict:
    result = {"import": "FAIL", "loader": "FAIL", "parquet": "FAIL"}
    try:
        import numpy as np

        import stoker

        result["import"] = f"ok stoker {stoker.__version__}, numpy {np.__version__}"
    except BaseException as e:  # noqa: BLE001 - reported, the run goes on
        result["import"] = "FAIL " + first_line(e)
        traceback.print_exc()
        return result
    try:
        fields = {"jpg": stoker.image(16), "cls": stoker.scalar()}
        batches = list(stoker.Loader(os.path.join(data, "shard.tar"), fields, batch_size=4, output="numpy"))
        images = np.concatenate([b["jpg"] for b in batches])
        classes = sorted(int(c) for b in batches for c in b["cls"])
        assert images.shape == (N, 3, 16, 16), images.shape
        assert classes == [i * 3 for i in range(N)], classes
        # The first sample's colour survives decode and resize (JPEG: within a few levels).
        assert abs(int(images[0, 1].mean()) - 255) <= 6, images[0, 1].mean()
        result["loader"] = f"ok {N} JPEGs"
    except BaseException as e:  # noqa: BLE001
        result["loader"] = "FAIL " + first_line(e)
        traceback.print_exc()
    path = os.path.join(data, "rows.parquet")
    try:
        pq = None
        if importlib.util.find_spec("pyarrow") is not None:
            import pyarrow.parquet as pq  # installed: it must import, to be the reference
    except BaseException as e:  # noqa: BLE001
        result["parquet"] = "FAIL pyarrow is installed but does not import: " + first_line(e)
        return result
    try:
        fields = {"jpg": stoker.image(16), "cls": stoker.scalar()}
        if pq is None:
            try:
                next(iter(stoker.Loader(path, fields, batch_size=4, output="numpy")))
                result["parquet"] = "FAIL read without pyarrow"
            except stoker.StokerError as e:
                assert "pip install 'pyarrow>=" in str(e), str(e)
                result["parquet"] = "ok no pyarrow: " + str(e)[str(e).index("pip install 'pyarrow"):].split(")")[0]
        else:
            import pyarrow

            batches = list(stoker.Loader(path, fields, batch_size=4, output="numpy"))
            got = sorted(int(c) for b in batches for c in b["cls"])
            want = sorted(pq.read_table(path).column("cls").to_pylist())  # pyarrow's own reading
            assert got == want, (got, want)
            assert sum(b["jpg"].shape[0] for b in batches) == N
            result["parquet"] = f"ok pyarrow {pyarrow.__version__}"
    except BaseException as e:  # noqa: BLE001
        result["parquet"] = "FAIL " + first_line(e)
        traceback.print_exc()
    return result


if __name__ == "__main__":
    if sys.argv[1] == "make":
        make(sys.argv[2])
    else:
        print(json.dumps(check(sys.argv[2])))
