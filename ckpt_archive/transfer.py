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
checkpoint per line as JSON. No pickle. A file may come from anyone: ``read_portable`` checks every
bound of spec section 12 (``limits.EXPORT_*``) before it reads what the bound covers, streams each
member a line at a time, and refuses anything else with ``InvalidExport``, one line.
"""

from __future__ import annotations

import contextlib
import io
import tarfile
import tempfile
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import IO, Any

import orjson
import zstandard
from pydantic import BaseModel, ConfigDict, Field, StrictStr, ValidationError, field_validator

from . import limits
from ._sync import run_sync
from .analysis.frames import states as history
from .archive import ArchiveCheckpointer
from .errors import CheckpointError, DuplicateCheckpointId
from .model import Checkpoint, check_identifier
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
                    line = orjson.dumps(ckpt.model_dump(mode="json")) + b"\n"
                    _check_written(f"checkpoint {ckpt.checkpoint_id!r}", len(line), limits.EXPORT_LINE_BYTES)
                    f.write(line)
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
        data = orjson.dumps(header, option=orjson.OPT_INDENT_2)
        _check_written("export.json", len(data), limits.EXPORT_HEADER_BYTES)
        with (
            zstandard.ZstdCompressor(compression_params=_WRITER).stream_writer(out, closefd=False) as zout,
            tarfile.open(fileobj=zout, mode="w|") as tar,
        ):
            info = tarfile.TarInfo("export.json")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
            for n, path in enumerate(files):
                tar.add(path, arcname=f"threads/{n}.jsonl")
    return reports


_WRITER = zstandard.ZstdCompressionParameters.from_level(10, window_log=22)
"""Level 10 with its own 4 MiB window, named: readers refuse more than ``limits.EXPORT_WINDOW_BYTES``."""


def _check_written(what: str, size: int, bound: int) -> None:
    """Refuse to write what an import would refuse to read."""
    if size > bound:
        raise InvalidExport(f"{what} would take {size} bytes of the export, more than an import reads ({bound})")


def read_portable(src: IO[bytes], only: set[str] | None = None) -> Iterator[tuple[str, int, Iterator[Checkpoint]]]:
    """``(thread_id, count, checkpoints)`` for each thread in a portable file (streamed: consume each
    thread's checkpoints before asking for the next thread; ``count`` is what export.json declares).

    A hostile file costs a bounded read, whatever it declares: the zstd window is bounded
    (``limits.EXPORT_WINDOW_BYTES``), each member is checked before it is read (a regular file, named
    once, by export.json, of at most what its checkpoints can take: ``limits.export_member_bytes``),
    lines are read one at a time up to ``limits.EXPORT_LINE_BYTES``, and the tar stream is cut off past
    the member being read plus ``limits.EXPORT_TAR_HEADER_BYTES`` (tarfile reads a pax header whole).
    Anything else is ``InvalidExport``, one line."""
    with _damaged():
        reader = zstandard.ZstdDecompressor(max_window_size=limits.EXPORT_WINDOW_BYTES).stream_reader(
            src, closefd=False
        )
        stream = _Budget(reader)
        with tarfile.open(fileobj=stream, mode="r|") as tar:
            members = iter(tar)
            first = next(members, None)
            if first is None or first.name != "export.json":
                raise InvalidExport("not a ckpt-archive export: export.json is not its first member")
            _check_member(first, limits.EXPORT_HEADER_BYTES, stream)
            header = _header(_read_member(tar, first))
            by_file = {t.file: t for t in header.threads}
            seen: set[str] = set()
            for member in members:
                entry = by_file.get(member.name)
                if entry is None or member.name in seen:
                    again = "a second" if entry is not None else "an unexpected"
                    raise InvalidExport(f"export holds {again} member {member.name!r}: not written by ckpt_archive")
                seen.add(member.name)
                _check_member(member, limits.export_member_bytes(entry.checkpoints), stream)
                if only is not None and entry.thread_id not in only:
                    continue
                yield entry.thread_id, entry.checkpoints, _checkpoints(tar, member, entry.checkpoints)
            lost = [t.file for t in header.threads if t.file not in seen and (only is None or t.thread_id in only)]
            if lost:
                raise InvalidExport(f"export lacks member {lost[0]!r} that export.json names: the file is truncated")


@contextlib.contextmanager
def _damaged() -> Iterator[None]:
    """Errors of a damaged file (its tar, its zstd frame, cut short) as ``InvalidExport``."""
    try:
        yield
    except (tarfile.TarError, zstandard.ZstdError, EOFError) as exc:
        raise InvalidExport(f"export file is damaged or not a .tar.zst ({type(exc).__name__}: {exc})") from None


class _Budget(io.RawIOBase):
    """The decompressed tar stream, refused past ``limit`` bytes: the end of the member being read plus
    ``limits.EXPORT_TAR_HEADER_BYTES`` (``_check_member`` moves it on), so no header tarfile reads whole
    (a pax or GNU long-name header) and no member data can be bigger than was checked."""

    def __init__(self, raw: zstandard.ZstdDecompressionReader) -> None:
        super().__init__()
        self.raw, self.pos, self.limit = raw, 0, limits.EXPORT_TAR_HEADER_BYTES

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        view = memoryview(buffer).cast("B")
        n = int(self.raw.readinto(view[: min(len(view), self.limit + 1 - self.pos)]))
        self.pos += n
        if self.pos > self.limit:
            raise InvalidExport(
                f"export's tar stream holds more than its members declare (past byte {self.limit}): a header "
                "bigger than any ckpt_archive writes, or damage; refused"
            )
        return n


def _check_member(member: tarfile.TarInfo, bound: int, stream: _Budget) -> None:
    """Refuse a member that is not a regular file or is bigger than ``bound``, before it is read; let
    the stream run to its end and the next member's header."""
    if not member.isreg():
        kind = "a symlink" if member.issym() else "a hard link" if member.islnk() else "not a regular file"
        raise InvalidExport(f"export member {member.name!r} is {kind}: not written by ckpt_archive, refused")
    if member.size > bound:
        raise InvalidExport(
            f"export member {member.name!r} declares {member.size} bytes, more than ckpt_archive writes for "
            f"it ({bound}): refused unread (not written by ckpt_archive, or damaged)"
        )
    blocks = -(-member.size // tarfile.BLOCKSIZE) * tarfile.BLOCKSIZE
    stream.limit = member.offset_data + blocks + limits.EXPORT_TAR_HEADER_BYTES


def _read_member(tar: tarfile.TarFile, member: tarfile.TarInfo) -> bytes:
    """A member already checked (``_check_member``) to be small enough to read whole."""
    f = tar.extractfile(member)
    if f is None:
        raise InvalidExport(f"export member {member.name!r} is not a file")
    return f.read()


def _checkpoints(tar: tarfile.TarFile, member: tarfile.TarInfo, declared: int) -> Iterator[Checkpoint]:
    """The member's checkpoints, one line at a time: a line over ``limits.EXPORT_LINE_BYTES`` and a
    count other than export.json declares are refused."""
    with _damaged():
        f = tar.extractfile(member)
        if f is None:
            raise InvalidExport(f"export member {member.name!r} is not a file")
        count = 0
        while line := f.readline(limits.EXPORT_LINE_BYTES + 1):
            if len(line) > limits.EXPORT_LINE_BYTES:
                raise InvalidExport(
                    f"{member.name}: line {count + 1} is longer than any checkpoint ({limits.EXPORT_LINE_BYTES} "
                    "bytes): refused (not written by ckpt_archive, or damaged)"
                )
            count += 1
            if count > declared:
                raise InvalidExport(f"{member.name}: more checkpoints than export.json declares ({declared})")
            yield _checkpoint(line, member.name)
        if count != declared:
            raise InvalidExport(
                f"{member.name}: {count} checkpoints, export.json declares {declared}: the file is truncated"
            )


class _ExportThread(BaseModel):
    """One thread of export.json, its types checked (a list where an id belongs is refused, typed)."""

    model_config = ConfigDict(extra="allow", frozen=True)

    thread_id: str
    file: StrictStr
    checkpoints: int = Field(strict=True, ge=0)

    @field_validator("thread_id", mode="before")
    @classmethod
    def _thread_id(cls, v: Any) -> str:
        return check_identifier(v, "thread_id")


class _ExportHeader(BaseModel):
    model_config = ConfigDict(extra="allow", frozen=True)

    threads: list[_ExportThread]


def _header(data: bytes) -> _ExportHeader:
    try:
        doc = orjson.loads(data)
    except orjson.JSONDecodeError:
        raise InvalidExport("export.json is not JSON") from None
    if not isinstance(doc, dict) or doc.get("format") != EXPORT_FORMAT:
        raise InvalidExport("not a ckpt-archive export (export.json names another format)")
    if doc.get("version") != EXPORT_VERSION:
        raise InvalidExport(
            f"export version {doc.get('version')!r} is not supported (this ckpt_archive reads {EXPORT_VERSION})"
        )
    try:
        header = _ExportHeader.model_validate(doc)
    except ValidationError as exc:
        raise InvalidExport(f"export.json has no valid thread list ({_first_error(exc)})") from None
    files = [t.file for t in header.threads]
    if len(set(files)) != len(files):
        raise InvalidExport("export.json has no valid thread list (two threads name the same member)")
    return header


def _first_error(exc: ValidationError) -> str:
    """Pydantic's first complaint, on one line: where (``threads.0.thread_id``) and what."""
    err = exc.errors()[0]
    where = ".".join(str(part) for part in err["loc"])
    return f"{where}: {' '.join(str(err['msg']).split())}" if where else " ".join(str(err["msg"]).split())


def _checkpoint(line: bytes, where: str) -> Checkpoint:
    try:
        return Checkpoint.model_validate(orjson.loads(line))
    except (orjson.JSONDecodeError, ValidationError) as exc:
        detail = _first_error(exc) if isinstance(exc, ValidationError) else str(exc).splitlines()[0]
        raise InvalidExport(f"{where}: a line is not a valid checkpoint ({detail})") from None
