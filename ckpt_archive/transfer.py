"""Copying threads between archives, directly or through a portable ``.tar.zst`` file.

A copy replays every checkpoint of a thread, oldest first, into the destination
with its id, parent, step, state, metadata and timestamps: forks survive, and
the destination writes its own snapshots and deltas. Checkpoints the
destination already has are skipped, so an interrupted copy can simply be run
again. A destination thread holding checkpoints the source does not have is
refused (the copy would otherwise be attached to someone else's history).

Portable file: a zstd-compressed tar holding ``export.json`` (first member:
``{"format": "ckpt-archive-export", "version": 1, "threads": [{"thread_id",
"file", "checkpoints"}]}``) and one ``threads/<n>.jsonl`` per thread, one
checkpoint per line as JSON. No pickle.
"""

from __future__ import annotations

import io
import tarfile
import tempfile
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import IO, Any

import orjson
import zstandard
from pydantic import ValidationError

from ._sync import run_sync
from .analysis.frames import states as history
from .archive import ArchiveCheckpointer
from .errors import CheckpointError, DuplicateCheckpointId
from .model import Checkpoint
from .ops.save import save

EXPORT_FORMAT = "ckpt-archive-export"
EXPORT_VERSION = 1
Tick = Callable[[], None]


class InvalidExport(CheckpointError, ValueError):
    """A portable export file is not one this ckpt_archive can read, or is damaged."""


@dataclass
class CopyReport:
    thread_id: str
    copied: int = 0
    skipped: int = 0


def is_portable(target: str) -> bool:
    return target.endswith((".tar.zst", ".tar.zstd"))


def replay(
    dest: ArchiveCheckpointer, thread_id: str, checkpoints: Iterable[Checkpoint], tick: Tick | None = None
) -> CopyReport:
    """Save ``checkpoints`` (oldest first) into ``dest``, skipping those it already has.

    A checkpoint whose parent is not among those before it (retention removed the
    parent, or it is a root) is saved detached: a snapshot of its own, its
    ``parent_id`` kept as lineage, as the source archive records it after a prune.
    """
    report = CopyReport(thread_id)
    have = {i.checkpoint_id for i in dest.list(thread_id)}
    incoming: set[str] = set()
    for ckpt in checkpoints:
        if ckpt.thread_id != thread_id:
            raise InvalidExport(f"checkpoint {ckpt.checkpoint_id!r} belongs to {ckpt.thread_id!r}, not {thread_id!r}")
        detached = ckpt.parent_id is None or ckpt.parent_id not in incoming
        if ckpt.checkpoint_id in have:
            report.skipped += 1
        else:
            if detached and not have <= incoming:  # a new chain while the destination holds others
                raise DuplicateCheckpointId(
                    f"thread {thread_id!r} already exists in the destination with other checkpoints; "
                    "delete it there first or copy to another archive"
                )
            run_sync(save(dest.engine, ckpt, detached=detached))
            report.copied += 1
        incoming.add(ckpt.checkpoint_id)
        if tick is not None:
            tick()
    extra = have - incoming
    if extra:
        raise DuplicateCheckpointId(
            f"thread {thread_id!r} in the destination has {len(extra)} checkpoint(s) the source does not have"
        )
    return report


def copy_threads(
    source: ArchiveCheckpointer, dest: ArchiveCheckpointer, threads: Iterable[str], tick: Tick | None = None
) -> list[CopyReport]:
    return [replay(dest, t, history(source, t), tick) for t in threads]


# -- portable file -----------------------------------------------------------------------------
def write_portable(
    source: ArchiveCheckpointer, threads: list[str], out: IO[bytes], tick: Tick | None = None
) -> list[CopyReport]:
    """Write the threads to ``out`` as a zstd-compressed tar (see the module docstring)."""
    reports, files = [], []
    with tempfile.TemporaryDirectory(prefix="ckpt-export-") as tmp:
        for n, thread in enumerate(threads):
            path = f"{tmp}/{n}.jsonl"
            report = CopyReport(thread)
            with open(path, "wb") as f:
                for ckpt in history(source, thread):
                    f.write(orjson.dumps(ckpt.model_dump(mode="json")) + b"\n")
                    report.copied += 1
                    if tick is not None:
                        tick()
            reports.append(report)
            files.append(path)
        header = {
            "format": EXPORT_FORMAT,
            "version": EXPORT_VERSION,
            "created_at": datetime.now(UTC).isoformat(),
            "threads": [
                {"thread_id": r.thread_id, "file": f"threads/{n}.jsonl", "checkpoints": r.copied}
                for n, r in enumerate(reports)
            ],
        }
        with (
            zstandard.ZstdCompressor(level=10).stream_writer(out, closefd=False) as zout,
            tarfile.open(fileobj=zout, mode="w|") as tar,
        ):
            data = orjson.dumps(header, option=orjson.OPT_INDENT_2)
            info = tarfile.TarInfo("export.json")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
            for n, path in enumerate(files):
                tar.add(path, arcname=f"threads/{n}.jsonl")
    return reports


def read_portable(src: IO[bytes], only: set[str] | None = None) -> Iterator[tuple[str, int, Iterator[Checkpoint]]]:
    """``(thread_id, count, checkpoints)`` for each thread in a portable file (streamed)."""
    try:
        reader = zstandard.ZstdDecompressor().stream_reader(src, closefd=False)
        with tarfile.open(fileobj=reader, mode="r|") as tar:
            members = iter(tar)
            first = next(members, None)
            if first is None or first.name != "export.json":
                raise InvalidExport("not a ckpt-archive export: export.json is not its first member")
            header = _header(_read_member(tar, first))
            by_file = {t["file"]: t for t in header["threads"]}
            for member in members:
                entry = by_file.get(member.name)
                if entry is None:
                    raise InvalidExport(f"export holds an unexpected member {member.name!r}")
                if only is not None and entry["thread_id"] not in only:
                    continue
                lines = _read_member(tar, member).splitlines()
                yield entry["thread_id"], len(lines), (_checkpoint(line, member.name) for line in lines)
    except (tarfile.TarError, zstandard.ZstdError, EOFError) as exc:
        raise InvalidExport(f"export file is damaged or not a .tar.zst ({type(exc).__name__}: {exc})") from None


def _read_member(tar: tarfile.TarFile, member: tarfile.TarInfo) -> bytes:
    f = tar.extractfile(member)
    if f is None:
        raise InvalidExport(f"export member {member.name!r} is not a file")
    return f.read()


def _header(data: bytes) -> dict[str, Any]:
    try:
        header = orjson.loads(data)
    except orjson.JSONDecodeError:
        raise InvalidExport("export.json is not JSON") from None
    if not isinstance(header, dict) or header.get("format") != EXPORT_FORMAT:
        raise InvalidExport("not a ckpt-archive export (export.json names another format)")
    if header.get("version") != EXPORT_VERSION:
        raise InvalidExport(
            f"export version {header.get('version')!r} is not supported (this ckpt_archive reads {EXPORT_VERSION})"
        )
    threads = header.get("threads")
    if not isinstance(threads, list) or not all(
        isinstance(t, dict) and {"thread_id", "file"} <= t.keys() for t in threads
    ):
        raise InvalidExport("export.json has no valid thread list")
    return header


def _checkpoint(line: bytes, where: str) -> Checkpoint:
    try:
        return Checkpoint.model_validate(orjson.loads(line))
    except (orjson.JSONDecodeError, ValidationError) as exc:
        raise InvalidExport(f"{where}: a line is not a valid checkpoint ({str(exc).splitlines()[0]})") from None
