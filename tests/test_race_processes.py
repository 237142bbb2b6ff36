"""Several processes racing to append to one thread: every successful save is committed exactly once,
the chain stays linear, nothing is unreachable, and the archive verifies clean."""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from kill_worker import state

import ckpt_archive as ca

WORKER = str(Path(__file__).with_name("kill_worker.py"))


def race(url: str, opts: dict[str, Any], processes: int, saves: int) -> tuple[int, int]:
    env = {**os.environ, "GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT": "false"}
    procs = [
        subprocess.Popen(
            [sys.executable, WORKER, url, json.dumps(opts), "race", str(saves), "retry"],
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )
        for _ in range(processes)
    ]
    outputs = [p.communicate(timeout=1200)[0] for p in procs]
    assert all(p.returncode == 0 for p in procs), [p.returncode for p in procs]
    lines = [line.split() for out in outputs for line in out.splitlines()]
    won = [(cid, int(step)) for cid, step in (x for x in lines if len(x) == 2)]
    conflicts = sum(1 for x in lines if x == ["conflict"])
    assert len(won) == processes * saves

    cp = ca.open_archive(url, storage_options=opts)
    infos = cp.list("race")
    assert len(infos) == len(won)  # committed count == successful saves
    assert {i.checkpoint_id for i in infos} == {cid for cid, _ in won}
    assert infos[0].parent_id is None
    assert all(b.parent_id == a.checkpoint_id for a, b in itertools.pairwise(infos))  # linear
    # Steps need not be consecutive: a save without parent_id appends to the head *at save time*,
    # which may have moved since the worker loaded the state it derived its step from.
    head = cp.load("race")
    assert head is not None and head.checkpoint_id == infos[-1].checkpoint_id
    for cid, step in won[:: max(1, len(won) // 20)]:
        assert cp.load_by_id(cid).state == state(step)  # type: ignore[union-attr]
    report = cp.verify("race")
    assert report.ok, str(report)
    return len(won), conflicts


@pytest.mark.parametrize("backend", ["local", "s3"])
def test_processes_race_on_one_thread(archive_url: Any, backend: str) -> None:
    url, opts = archive_url(backend)
    won, conflicts = race(url, opts, processes=4, saves=20)
    assert won == 80
    assert conflicts > 0  # they really raced


@pytest.mark.soak
@pytest.mark.parametrize("backend", ["local", "memory-free", "s3", "gcs", "azure"])
def test_processes_race_on_one_thread_soak(archive_url: Any, backend: str) -> None:
    if backend == "memory-free":
        pytest.skip("memory:// is per process: no cross-process race possible")
    url, opts = archive_url(backend)
    won, _ = race(url, opts, processes=4, saves=250)
    assert won == 1000
