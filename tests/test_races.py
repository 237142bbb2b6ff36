"""Separate processes racing on one thread: every save commits or raises CheckpointConflict."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import ckpt_archive as ca
from tests.test_archive import check_linear

WORKER = str(Path(__file__).with_name("race_worker.py"))


def race(url: str, opts: dict[str, Any], processes: int, attempts: int) -> tuple[list[str], int]:
    procs = [
        subprocess.Popen(
            [sys.executable, WORKER, url, json.dumps(opts), f"p{n}", str(attempts)],
            stdout=subprocess.PIPE,
            text=True,
        )
        for n in range(processes)
    ]
    committed: list[str] = []
    conflicts = 0
    for proc in procs:
        out, _ = proc.communicate(timeout=240)
        assert proc.returncode == 0
        summary = json.loads(out.strip().splitlines()[-1])
        committed += summary["committed"]
        conflicts += summary["conflicts"]
    return committed, conflicts


@pytest.mark.parametrize("backend", ["local", "s3"])
def test_processes_race_on_one_thread(archive_url: Any, backend: str) -> None:
    url, opts = archive_url(backend)
    committed, conflicts = race(url, opts, processes=3, attempts=15)
    assert len(committed) + conflicts == 45
    archive = ca.open_archive(url, storage_options=opts)
    assert {i.checkpoint_id for i in archive.list("race")} == set(committed)
    check_linear(archive, "race", len(committed))
