"""Separate processes racing on one thread: every save commits or raises CheckpointConflict."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import ckpt_archive as ca
from tests.test_archive import check_linear

WORKER = str(Path(__file__).with_name("race_worker.py"))


def race(
    url: str, opts: dict[str, Any], processes: int, attempts: int, names: list[str] | None = None
) -> tuple[list[str], int]:
    procs = [
        subprocess.Popen(
            [sys.executable, WORKER, url, json.dumps(opts), name, str(attempts)],
            stdout=subprocess.PIPE,
            text=True,
            env={**os.environ, "GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT": "false"},
        )
        for name in names or [f"p{n}" for n in range(processes)]
    ]
    committed: list[str] = []
    conflicts = 0
    for proc in procs:
        out, _ = proc.communicate(timeout=1800)
        assert proc.returncode == 0
        summary = json.loads(out.strip().splitlines()[-1])
        committed += summary["committed"]
        conflicts += summary["conflicts"]
    return committed, conflicts


def race_and_check(archive_url: Any, backend: str, processes: int, attempts: int) -> None:
    url, opts = archive_url(backend)
    committed: list[str] = []
    conflicts = rounds = 0
    while conflicts == 0 and rounds < 5:  # until they really raced: a round of fast saves may not overlap
        more, lost = race(url, opts, processes=processes, attempts=attempts)
        committed, conflicts, rounds = committed + more, conflicts + lost, rounds + 1
    assert len(committed) + conflicts == rounds * processes * attempts
    assert conflicts > 0  # they really raced
    archive = ca.open_archive(url, storage_options=opts)
    assert {i.checkpoint_id for i in archive.list("race")} == set(committed)  # committed == successful saves
    check_linear(archive, "race", len(committed))
    report = archive.verify("race")  # nothing unreachable, every object proven
    assert report.ok, str(report)


@pytest.mark.parametrize("backend", ["local", "s3"])
def test_processes_race_on_one_thread(archive_url: Any, backend: str) -> None:
    race_and_check(archive_url, backend, processes=4, attempts=20)


@pytest.mark.soak
@pytest.mark.parametrize("backend", ["local", "s3", "gcs", "azure"])
def test_processes_race_on_one_thread_soak(archive_url: Any, backend: str) -> None:
    race_and_check(archive_url, backend, processes=4, attempts=250)


def test_saves_race_with_a_compact_that_merges_segments(archive_url: Any) -> None:
    """Three savers and a process compacting in a loop with merges of 2 (tiers, spec.md section 6):
    the merges' commits race the saves' (each re-plans on the newer manifest, never loses a save);
    every save that returned is listed, the chain is linear, verify is clean, and merges happened."""
    from ckpt_archive.ops.history import tiers

    url, opts = archive_url("local")
    committed, _ = race(url, opts, 4, 20, names=["p0", "p1", "p2", "compactor"])
    archive = ca.open_archive(url, storage_options=opts)
    assert {i.checkpoint_id for i in archive.list("race")} == set(committed)
    check_linear(archive, "race", len(committed))
    report = archive.verify("race")
    assert report.ok, str(report)
    assert max(level for _, level, _, _ in tiers(archive.engine.log.manifests["race"])) >= 1


@pytest.mark.parametrize("backend", ["local", "memory"])
def test_save_after_a_fresh_load_detects_a_commit_in_between(archive_url: Any, backend: str) -> None:
    """A fresh writer's first load may come from the head hint alone (no manifest cached); a save built
    on it must still conflict when someone committed in between, not append to the newer head."""
    url, opts = archive_url(backend)
    first = ca.open_archive(url, storage_options=opts)
    first.save(ca.Checkpoint.new("race", {"log": ["a"]}))
    reader, other = ca.open_archive(url, storage_options=opts), ca.open_archive(url, storage_options=opts)
    seen = reader.load("race")
    assert seen is not None and seen.state == {"log": ["a"]}
    assert other.load("race") is not None
    other.save(ca.Checkpoint.new("race", {"log": ["a", "b"]}, step=1))
    with pytest.raises(ca.CheckpointConflict):
        reader.save(ca.Checkpoint.new("race", {"log": [*seen.state["log"], "c"]}, step=1))
    latest = reader.load("race")
    assert latest is not None and latest.state == {"log": ["a", "b"]}
    reader.save(ca.Checkpoint.new("race", {"log": [*latest.state["log"], "c"]}, step=2))
    check_linear(ca.open_archive(url, storage_options=opts), "race", 3)
