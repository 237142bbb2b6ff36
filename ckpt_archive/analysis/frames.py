"""Frames through the archive API (complete, including a thread's still-open segment).

* ``checkpoints_table/frame`` -- one row per checkpoint, from the manifest alone
  (no state payload is read); many threads are listed concurrently.
* ``changes_table/frame`` -- one row per changed key path per checkpoint: the
  delta from its parent (from ``{}`` for a root).
* ``states`` -- every checkpoint of a thread with its reconstructed state, oldest first.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterator, Sequence
from typing import Any, Literal

import pyarrow as pa

from .. import codec
from .._sync import run_sync
from ..archive import ArchiveCheckpointer, open_archive
from ..delta import diff
from ..errors import ArchiveNotFound, CheckpointNotFound, MissingExtra
from ..format import layout
from ..model import Checkpoint, CheckpointInfo
from .conversation import MESSAGE_SCHEMA, message_row, messages_of
from .replay import Views, load_named

Backend = Literal["pandas", "polars", "arrow"]
Source = str | ArchiveCheckpointer
Progress = Callable[[str, int, int], None]

CHECKPOINT_COLUMNS = [
    ("thread_id", pa.string()),
    ("checkpoint_id", pa.string()),
    ("parent_id", pa.string()),
    ("step", pa.int64()),
    ("kind", pa.string()),
    ("created_at", pa.timestamp("us", tz="UTC")),
    ("bytes", pa.int64()),
    ("version", pa.int64()),
]
CHANGE_SCHEMA = pa.schema(
    [
        ("thread_id", pa.string()),
        ("checkpoint_id", pa.string()),
        ("parent_id", pa.string()),
        ("step", pa.int64()),
        ("created_at", pa.timestamp("us", tz="UTC")),
        ("op", pa.string()),
        ("key", pa.string()),
        ("path", pa.string()),
        ("depth", pa.int32()),
        ("value", pa.string()),
        ("value_bytes", pa.int64()),
    ]
)


def archive_of(source: Source, storage_options: dict[str, Any] | None = None) -> ArchiveCheckpointer:
    """An open archive for a URL (with ``storage_options``), or the archive itself.

    A URL must hold an archive already: readers never create one (a mistyped URL is
    ``ArchiveNotFound``, not an empty result).
    """
    if isinstance(source, ArchiveCheckpointer):
        return source
    archive = open_archive(source, storage_options=storage_options)
    require_archive(archive)
    return archive


def require_archive(archive: ArchiveCheckpointer) -> None:
    if run_sync(archive.store.get_or_none(layout.ARCHIVE_MARKER)) is None:
        raise ArchiveNotFound(f"no archive at {archive.url!r} (it has no {layout.ARCHIVE_MARKER})")


def _needs(module: str) -> str:
    return (
        f"backend={module!r} needs {module}, in the analysis extra: pip install 'ckpt-archive[analysis]' "
        f"(from a clone: pip install '.[analysis]'), or pass backend='arrow'"
    )


def convert(table: pa.Table, backend: Backend) -> Any:
    if backend == "arrow":
        return table
    if backend == "pandas":
        try:
            import pandas  # noqa: F401
        except ImportError:
            raise MissingExtra(_needs("pandas")) from None
        return table.to_pandas()
    if backend == "polars":
        try:
            import polars as pl
        except ImportError:
            raise MissingExtra(_needs("polars")) from None

        return pl.from_arrow(table)
    raise ValueError(f"backend must be 'pandas', 'polars' or 'arrow', not {backend!r}")


async def gather_limited(
    jobs: Sequence[Callable[[], Awaitable[Any]]], concurrency: int, on_done: Callable[[], None] | None = None
) -> list[Any]:
    """Run ``jobs`` at most ``concurrency`` at a time; results in job order."""
    sem = asyncio.Semaphore(max(1, concurrency))

    async def one(job: Callable[[], Awaitable[Any]]) -> Any:
        async with sem:
            result = await job()
        if on_done is not None:
            on_done()
        return result

    return list(await asyncio.gather(*(one(j) for j in jobs)))


def progress_bar(enabled: bool, description: str) -> Any:
    """A rich progress bar (or a no-op stand-in) used as a context manager."""
    if enabled:
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        return Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            transient=True,
        )
    return _NoProgress()


class _NoProgress:
    def __enter__(self) -> _NoProgress:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def add_task(self, description: str, total: int | None = None) -> int:
        return 0

    def advance(self, task: int, advance: float = 1) -> None:
        return None


# -- checkpoints ---------------------------------------------------------------------------
async def alist_threads(
    archive: ArchiveCheckpointer,
    threads: Sequence[str] | None,
    *,
    concurrency: int = 8,
    progress: bool = False,
) -> dict[str, list[CheckpointInfo]]:
    """``{thread: list(thread)}`` for the given threads (default: every thread), listed concurrently."""
    names = list(threads) if threads is not None else await archive.athreads()
    with progress_bar(progress, "listing threads") as bar:
        task = bar.add_task("listing threads", total=len(names))
        jobs = [lambda t=t: archive.alist(t) for t in names]
        lists = await gather_limited(jobs, concurrency, lambda: bar.advance(task))
    return dict(zip(names, lists, strict=True))


def checkpoints_table(
    source: Source,
    threads: Sequence[str] | None = None,
    *,
    storage_options: dict[str, Any] | None = None,
    concurrency: int = 8,
    progress: bool = False,
) -> pa.Table:
    """One row per checkpoint (manifest only), metadata keys as ``metadata.<key>`` columns."""
    archive = archive_of(source, storage_options)
    listed = run_sync(alist_threads(archive, threads, concurrency=concurrency, progress=progress))
    infos = [info for lst in listed.values() for info in lst]
    cols: dict[str, list[Any]] = {name: [] for name, _ in CHECKPOINT_COLUMNS}
    meta_keys = sorted({k for info in infos for k in info.metadata})
    metas: dict[str, list[Any]] = {k: [] for k in meta_keys}
    for info in infos:
        cols["thread_id"].append(info.thread_id)
        cols["checkpoint_id"].append(info.checkpoint_id)
        cols["parent_id"].append(info.parent_id)
        cols["step"].append(info.step)
        cols["kind"].append(info.kind)
        cols["created_at"].append(info.created_at)
        cols["bytes"].append(info.stored_bytes)
        cols["version"].append(info.version)
        for k in meta_keys:
            metas[k].append(info.metadata.get(k))
    arrays = [pa.array(cols[name], type=typ) for name, typ in CHECKPOINT_COLUMNS]
    names = [name for name, _ in CHECKPOINT_COLUMNS]
    for k in meta_keys:
        arrays.append(_metadata_array(metas[k]))
        names.append(f"metadata.{k}")
    return pa.Table.from_arrays(arrays, names=names)


def _metadata_array(values: list[Any]) -> pa.Array:
    """Scalars of one type stay typed; anything mixed or nested becomes JSON text."""
    kinds = {type(v) for v in values if v is not None}
    if len(kinds) <= 1 and not kinds & {dict, list}:
        try:
            return pa.array(values)
        except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError):
            pass
    return pa.array([None if v is None else codec.dumps(v).decode() for v in values], type=pa.string())


def checkpoints_frame(
    source: Source,
    threads: Sequence[str] | None = None,
    *,
    storage_options: dict[str, Any] | None = None,
    backend: Backend = "pandas",
    concurrency: int = 8,
    progress: bool = False,
) -> Any:
    """``checkpoints_table`` as a pandas (default) or polars DataFrame."""
    table = checkpoints_table(
        source, threads, storage_options=storage_options, concurrency=concurrency, progress=progress
    )
    return convert(table, backend)


# -- states and changes --------------------------------------------------------------------
def states(source: Source, thread_id: str, *, storage_options: dict[str, Any] | None = None) -> Iterator[Checkpoint]:
    """Checkpoints of ``thread_id`` with their reconstructed states, oldest first (lazily loaded)."""
    archive = archive_of(source, storage_options)
    infos = archive.list(thread_id)
    if not infos:
        raise CheckpointNotFound(f"thread {thread_id!r} has no checkpoints in {archive.url!r}")
    yield from archive.history(thread_id)  # one GET per object, each state built from its parent's


def changes_table(source: Source, thread_id: str, *, storage_options: dict[str, Any] | None = None) -> pa.Table:
    """One row per changed key path per checkpoint (op set/del/append/splice, key, JSON path and value:
    a splice's value is ``{"at", "remove", "insert"}``, spec.md section 5).

    The change is that of what the user reads (``conversation.view``): in a LangGraph thread, the graph's
    channels (``key`` is the channel, a message list's growth an ``append`` of the messages' JSON), never
    LangGraph's bookkeeping (``branch:to:*``, ``__start__``, versions seen, ids, carried writes); a
    ``DeltaChannel``'s messages as ``get_state`` rebuilds them (``replay.Views``), so between its
    snapshots the channel grows by appends rather than vanishing."""

    archive = archive_of(source, storage_options)
    infos = archive.list(thread_id)
    if not infos:
        raise CheckpointNotFound(f"thread {thread_id!r} has no checkpoints in {archive.url!r}")
    cols: dict[str, list[Any]] = {name: [] for name in CHANGE_SCHEMA.names}
    children: dict[str, int] = {}
    for info in infos:
        if info.parent_id is not None:
            children[info.parent_id] = children.get(info.parent_id, 0) + 1
    known: dict[str, dict[str, Any]] = {}  # states still needed as a base (a child is pending)
    views = Views(archive)  # a DeltaChannel's messages rebuilt where the checkpoint stores none
    for ckpt in archive.history(thread_id):
        pid = ckpt.parent_id
        base = {} if pid is None else known.get(pid)
        if base is None:  # parent no longer listed (pruned): the stored parent if it is still there
            parent = archive.load_by_id(pid) if pid else None
            base = {} if parent is None else views.of(parent)
        if pid is not None and pid in children:
            children[pid] -= 1
            if children[pid] == 0:
                known.pop(pid, None)
        current = views.of(ckpt)
        for op in diff(base, current):
            value = None if op["op"] == "del" else codec.dumps(op["value"]).decode()
            cols["thread_id"].append(thread_id)
            cols["checkpoint_id"].append(ckpt.checkpoint_id)
            cols["parent_id"].append(pid)
            cols["step"].append(ckpt.step)
            cols["created_at"].append(ckpt.created_at)
            cols["op"].append(op["op"])
            cols["key"].append(op["path"][0])
            cols["path"].append(codec.dumps(op["path"]).decode())
            cols["depth"].append(len(op["path"]))
            cols["value"].append(value)
            cols["value_bytes"].append(0 if value is None else len(value.encode()))
        if children.get(ckpt.checkpoint_id):
            known[ckpt.checkpoint_id] = current
    return pa.table(cols, schema=CHANGE_SCHEMA)


def changes_frame(
    source: Source,
    thread_id: str,
    *,
    storage_options: dict[str, Any] | None = None,
    backend: Backend = "pandas",
) -> Any:
    """``changes_table`` as a pandas (default) or polars DataFrame."""
    return convert(changes_table(source, thread_id, storage_options=storage_options), backend)


# -- conversations -------------------------------------------------------------------------
def messages_table(
    source: Source,
    thread_id: str,
    *,
    checkpoint_id: str | None = None,
    channel: str = "messages",
    storage_options: dict[str, Any] | None = None,
) -> pa.Table:
    """Every message of a checkpoint (the thread's latest by default; ``checkpoint_id`` an archive id or
    a LangGraph checkpoint id, ``replay.load_named``), in order: one row each
    (``MESSAGE_SCHEMA``), through the archive API (complete, open segment included). A LangGraph
    ``DeltaChannel`` between its snapshots is rebuilt as ``get_state`` rebuilds it (``replay.Views``)."""
    archive = archive_of(source, storage_options)
    ckpt = archive.load(thread_id) if checkpoint_id is None else load_named(archive, thread_id, checkpoint_id)
    if ckpt is None or ckpt.thread_id != thread_id:
        what = "has no checkpoints" if checkpoint_id is None else f"has no checkpoint {checkpoint_id!r}"
        raise CheckpointNotFound(f"thread {thread_id!r} {what} in {archive.url!r}")
    rows = [
        {"thread_id": thread_id, "checkpoint_id": ckpt.checkpoint_id, "step": ckpt.step, "index": i, **message_row(m)}
        for i, m in enumerate(messages_of(ckpt, channel, Views(archive).of(ckpt)))
    ]
    return pa.Table.from_pylist(rows, schema=MESSAGE_SCHEMA)


def messages_frame(
    source: Source,
    thread_id: str,
    *,
    checkpoint_id: str | None = None,
    channel: str = "messages",
    storage_options: dict[str, Any] | None = None,
    backend: Backend = "pandas",
) -> Any:
    """``messages_table`` as a pandas (default) or polars DataFrame: a thread as a conversation."""
    table = messages_table(
        source, thread_id, checkpoint_id=checkpoint_id, channel=channel, storage_options=storage_options
    )
    return convert(table, backend)
