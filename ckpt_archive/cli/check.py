"""``verify``: prove what the archive holds, collecting every problem (exit 1 if there is one).

With the archive's own ``verify`` (when this build has it) every commit, manifest and
object is checked and each rebuilt state compared with the digest
recorded at save; otherwise every listed checkpoint is rebuilt by id, which
checks each object's size and sha256 on the way.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any

import typer

from .._sync import run_sync
from ..analysis.frames import gather_limited
from ..archive import ArchiveCheckpointer
from ..errors import CheckpointError
from ._common import (
    ConfigOpt,
    DebugOpt,
    JsonOpt,
    Ticker,
    UrlOpt,
    app,
    emit_json,
    guarded,
    open_from,
    out,
    progress,
    settings,
)
from .maintain import ThreadsArg, pick_threads
from .read import listed, one_line


def native_verify(archive: Any, threads: list[str] | None, tick: Ticker) -> dict[str, Any]:
    reports = []
    for thread in threads if threads else [None]:
        reports.append(archive.verify(thread))
        tick()
    problems = [
        {
            "thread_id": p.thread_id,
            "checkpoint_id": p.checkpoint_id,
            "error": p.kind,
            "message": p.message,
            "key": p.key,
        }
        for r in reports
        for p in r.problems
    ]
    checkpoints = sum(r.checkpoints for r in reports)
    bad = {p["checkpoint_id"] for p in problems if p["checkpoint_id"]}
    return {
        "ok": not problems,
        "threads": sum(r.threads for r in reports),
        "checkpoints": checkpoints,
        "verified": checkpoints - len(bad),
        "objects": sum(r.objects for r in reports),
        "problems": problems,
        "orphans": [o for r in reports for o in r.orphans],
    }


def rebuild_all(archive: ArchiveCheckpointer, threads: list[str] | None, concurrency: int) -> dict[str, Any]:
    by_thread, damaged = listed(archive, threads, concurrency)
    problems: list[dict[str, Any]] = [
        {
            "thread_id": t,
            "checkpoint_id": None,
            "error": type(e).__name__,
            "message": one_line(e).split(": ", 1)[1],
            "key": None,
        }
        for t, e in damaged.items()
    ]
    total = sum(len(v) for v in by_thread.values())
    with progress("verifying checkpoints", total) as tick:

        async def one(thread: str) -> int:
            ok = 0
            for info in by_thread[thread]:
                try:
                    if await archive.aload_by_id(info.checkpoint_id) is None:
                        raise CheckpointError("listed in the manifest but cannot be loaded by id")
                    ok += 1
                except CheckpointError as exc:
                    problem: dict[str, Any] = {"thread_id": thread, "checkpoint_id": info.checkpoint_id}
                    problem.update(error=type(exc).__name__, message=str(exc), key=getattr(exc, "key", None))
                    problems.append(problem)
                tick()
            return ok

        async def run() -> list[int]:
            jobs: list[Callable[[], Awaitable[int]]] = [partial(one, t) for t in by_thread]
            return await gather_limited(jobs, concurrency)

        oks = run_sync(run())
    return {
        "ok": not problems,
        "threads": len(by_thread) + len(damaged),
        "checkpoints": total,
        "verified": sum(oks),
        "problems": problems,
    }


@app.command()
def verify(
    threads: ThreadsArg = None,
    url: UrlOpt = None,
    config: ConfigOpt = None,
    json: JsonOpt = False,
    debug: DebugOpt = False,
) -> None:
    """Rebuild every checkpoint's state, checking every object's size and sha256; exit 1 on any problem."""
    with guarded(debug):
        s = settings(url, config)
        archive = open_from(s)
        names = pick_threads(archive, threads, False) if threads else None
        if getattr(archive, "verify", None) is not None:
            with progress("verifying threads", len(names) if names else 1) as tick:
                body = native_verify(archive, names, tick)
        else:
            body = rebuild_all(archive, names, s.concurrency)
        if json:
            emit_json(body)
        else:
            console = out()
            for p in body["problems"]:
                where = " ".join(str(x) for x in (p["thread_id"], p["checkpoint_id"]) if x)
                console.print(f"BAD {where}: {p['error']}: {p['message']}", markup=False)
            verdict = "OK" if body["ok"] else f"{len(body['problems'])} problem(s)"
            counts = f"{body['verified']}/{body['checkpoints']} checkpoints of {body['threads']} threads"
            console.print(f"{verdict}: {counts} verified", markup=False)
        if not body["ok"]:
            raise typer.Exit(1)
