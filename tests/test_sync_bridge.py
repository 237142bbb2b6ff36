"""The sync facade over the async core: an unfinished sync iterator closed on the I/O loop's own thread
(the garbage collector may finalise it there) closes its async iterator without an error, and a process
left holding unfinished iterators exits at once."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

import ckpt_archive as ca
from ckpt_archive._sync import iterate_sync, run_sync


def test_an_unfinished_iterator_closed_on_the_io_loop_closes_its_source() -> None:
    closed: list[bool] = []

    async def source() -> AsyncIterator[int]:
        try:
            for i in range(10):
                yield i
        finally:
            closed.append(True)

    items = iterate_sync(source())
    assert next(items) == 0

    async def close_here() -> None:
        items.close()  # raised "sync ckpt_archive API called from inside the I/O loop" before
        for _ in range(5):
            await asyncio.sleep(0)

    run_sync(close_here())
    assert closed == [True]

    elsewhere = iterate_sync(source())
    assert next(elsewhere) == 0
    elsewhere.close()  # from this (non-loop) thread: waits for the source to close
    assert closed == [True, True]


# -- exiting with an unfinished iterator ----------------------------------------------------------
ROOT = Path(__file__).resolve().parent.parent
EXIT_SCRIPT = """
import json, sys
import ckpt_archive as ca
from ckpt_archive.analysis import states
url, opts = sys.argv[1], json.loads(sys.argv[2])
archive = ca.open_archive(url, storage_options=opts)
history = archive.history("t")
analysed = states(url, "t", storage_options=opts)
print(next(history).step, next(analysed).step, flush=True)
"""


def _python(*args: str) -> subprocess.CompletedProcess[str]:
    """Run this clone's ckpt_archive in a fresh interpreter; a hang at exit is a ``TimeoutExpired``."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, timeout=30, env=env, cwd=ROOT)


def _thread_of_three(url: str, opts: dict[str, Any]) -> None:
    archive = ca.open_archive(url, storage_options=opts, full_snapshot_interval=2)
    for step in range(3):
        archive.save(ca.Checkpoint.new("t", {"step": step, "items": list(range(step))}, step=step))


@pytest.mark.parametrize("backend", ["local", "s3"])
def test_exit_with_unfinished_history_iterators_is_instant(archive_url: Any, backend: str) -> None:
    """history() and analysis.states() left at their first item: the process exits at once (it used to
    wait forever: the iterators' cleanup ran at interpreter shutdown and waited for fsspec's I/O loop,
    whose daemon thread no longer runs by then)."""
    url, opts = archive_url(backend)
    _thread_of_three(url, opts)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    args = [sys.executable, "-c", EXIT_SCRIPT, url, json.dumps(opts)]
    with subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=ROOT) as proc:
        assert proc.stdout is not None and proc.stderr is not None
        line = proc.stdout.readline()  # the script's last line: what is left is the exit
        started = time.monotonic()  # imports and reads (slow on a loaded machine) are not the exit
        try:
            proc.wait(timeout=30)
        finally:
            proc.kill()
        exited_in = time.monotonic() - started
        err = proc.stderr.read()
    assert (proc.returncode, line) == (0, "0 0\n") and "Traceback" not in err, err
    assert exited_in < 10, f"the process took {exited_in:.1f} s to exit after its last line"


def test_cli_export_error_with_debug_exits(tmp_path: Path) -> None:
    """``export ... --debug`` failing while it reads a thread's history shows the traceback and exits."""
    src, dest = str(tmp_path / "src"), str(tmp_path / "dest")
    _thread_of_three(src, {})
    ca.open_archive(dest).save(ca.Checkpoint.new("t", {"other": True}))  # the copy will refuse it
    done = _python("-m", "ckpt_archive.cli", "export", "t", "--to", dest, "--url", src, "--debug")
    assert done.returncode == 1 and "DuplicateCheckpointId" in done.stderr, done.stderr
