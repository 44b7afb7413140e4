"""The CPUs a loader counts are the job's, not the machine's (core/cpu_share.h):
a real `taskset` mask, torchrun's LOCAL_WORLD_SIZE, and a real 2-rank torchrun
job, each in a child process whose defaults are read back from
``loader.settings``. The cgroup parsing itself is tested on fixture trees in
tests/cpp/core/cpu_share_test.cc."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import stoker
from conftest import stoker_env, write_vision_shards

PROBE = textwrap.dedent(
    """
    import json, sys
    import stoker
    ld = stoker.Loader(sys.argv[1], {"cls": stoker.scalar("int64")}, batch_size=4, output="numpy")
    s = ld.settings
    print(json.dumps({"decode_threads": s["decode_threads"], "cores": s["cores"], "cores_from": s["cores_from"],
                      "share": stoker._stoker.cpu_share()}))
    """
)


@pytest.fixture(scope="module")
def shards(tmp_path_factory) -> str:
    d = tmp_path_factory.mktemp("cpu_share")
    write_vision_shards(d, shards=1, per_shard=8)
    return str(d / "shard-000000.tar")


def probe(shards: str, prefix=(), **env) -> dict:
    child = {k: v for k, v in stoker_env().items()
             if k not in ("LOCAL_WORLD_SIZE", "SLURM_NTASKS_PER_NODE", "STOKER_LOCAL_RANKS")}
    child.update(env)
    proc = subprocess.run([*prefix, sys.executable, "-c", PROBE, shards], env=child, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def expected(share: dict, ranks: int) -> int:
    """The rule of core/cpu_share.h for ranks sharing this process's mask."""
    pool = share["affinity"] if share["quota"] == 0 else min(share["affinity"], share["quota"])
    return max(1, int(pool / ranks))


def test_settings_say_where_the_cores_came_from(shards, tmp_path):
    from stoker.report import write_report

    ld = stoker.Loader(shards, {"cls": stoker.scalar("int64")}, batch_size=4, output="numpy",
                       jsonl=tmp_path / "run.jsonl")
    s = ld.settings
    share = stoker._stoker.cpu_share()
    assert share["affinity"] == len(os.sched_getaffinity(0))
    assert s["cores"] == share["cores"] and s["cores_from"] == share["cores_from"]
    assert s["cores_from"].startswith(f"{s['cores']} core")
    assert f"affinity {share['affinity']}" in s["cores_from"]
    assert s["decode_threads"] == s["cores"]  # the auto default starts at the share
    # report() carries the same line (its tuning settings), and so does the run's page.
    for _ in ld:
        pass
    assert ld.report()["tuning"]["settings"]["cores_from"] == s["cores_from"]
    ld.close()
    page = write_report(tmp_path / "run.jsonl", tmp_path / "run.html").read_text()
    assert f"Cores: {s['cores_from']}" in page


@pytest.mark.skipif(shutil.which("taskset") is None, reason="taskset (util-linux) is not installed")
def test_taskset_one_cpu_gives_one_decoder(shards):
    cpu = min(os.sched_getaffinity(0))
    got = probe(shards, prefix=("taskset", "-c", str(cpu)))
    assert got["decode_threads"] == 1, got
    assert got["cores"] == 1
    assert "affinity 1" in got["cores_from"], got["cores_from"]


def test_local_world_size_equal_to_the_cores_gives_one_each(shards):
    share = stoker._stoker.cpu_share()
    n = len(os.sched_getaffinity(0))
    got = probe(shards, LOCAL_WORLD_SIZE=str(n))
    assert got["decode_threads"] == 1, got
    assert f"{n} local rank" in got["cores_from"] and "(LOCAL_WORLD_SIZE)" in got["cores_from"]
    # Half as many ranks: each gets its half (or the quota's half).
    if n >= 4:
        assert probe(shards, LOCAL_WORLD_SIZE=str(n // 2))["cores"] == expected(share, n // 2)
    # The user's count comes before torchrun's.
    got = probe(shards, LOCAL_WORLD_SIZE=str(n), STOKER_LOCAL_RANKS="1")
    assert got["cores"] == share["cores"] and "(STOKER_LOCAL_RANKS)" in got["cores_from"]


@pytest.mark.skipif(shutil.which("taskset") is None or len(os.sched_getaffinity(0)) < 2,
                    reason="needs taskset and 2 CPUs to pin a rank to one of them")
def test_a_pinned_rank_is_not_divided_again(shards):
    # Each rank given its own CPU (taskset per rank): its mask is its share.
    cpu = min(os.sched_getaffinity(0))
    got = probe(shards, prefix=("taskset", "-c", str(cpu)), LOCAL_WORLD_SIZE="2")
    assert got["cores"] == 1 and got["share"]["pinned"], got


TORCHRUN = textwrap.dedent(
    """
    import json, sys
    from datetime import timedelta
    import torch.distributed as dist
    import stoker

    dist.init_process_group("gloo", timeout=timedelta(seconds=30))
    ld = stoker.Loader(sys.argv[1], {"cls": stoker.scalar("int64")}, batch_size=2, output="numpy")
    mine = {"rank": dist.get_rank(), "cores": ld.settings["cores"], "decode_threads": ld.settings["decode_threads"],
            "cores_from": ld.settings["cores_from"]}
    every = [None] * dist.get_world_size()
    dist.all_gather_object(every, mine)
    if dist.get_rank() == 0:
        json.dump(every, open(sys.argv[2], "w"))
    dist.destroy_process_group()
    """
)


def test_torchrun_ranks_share_the_cpus(tmp_path, shards):
    pytest.importorskip("torch.distributed")
    script = tmp_path / "cpu_rank.py"
    script.write_text(TORCHRUN)
    out = tmp_path / "ranks.json"
    env = {k: v for k, v in stoker_env().items() if k not in ("LOCAL_WORLD_SIZE", "STOKER_LOCAL_RANKS")}
    proc = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
                           str(script), shards, str(out)], env=env, capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    ranks = json.loads(out.read_text())
    want = expected(stoker._stoker.cpu_share(), 2)  # 1 on a 2-core machine
    assert [r["rank"] for r in ranks] == [0, 1]
    for r in ranks:
        assert r["cores"] == want and r["decode_threads"] == want, r
        assert "2 local ranks (LOCAL_WORLD_SIZE)" in r["cores_from"], r
