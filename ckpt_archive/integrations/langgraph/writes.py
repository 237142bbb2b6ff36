"""Pending writes of LangGraph checkpoints: small sealed objects next to the archive threads.

Layout (under the archive root)::

    _langgraph/writes/<enc archive thread>/<enc langgraph checkpoint id>/<enc task_id>.json
    _langgraph/writes/<enc archive thread>/<enc langgraph checkpoint id>/<enc task_id>.special<-i>.json

The first object holds a task's regular writes (``idx >= 0``); they are created put-if-absent and,
as in LangGraph's own savers, a ``(task_id, idx)`` already stored is never overwritten. Each special
channel write (ERROR, SCHEDULED, INTERRUPT, RESUME; ``idx < 0``) has its own object and overwrites.
Reading a checkpoint's writes costs one LIST plus one GET per task, whatever the thread's length;
reading those of many checkpoints of a thread (``list``) costs one recursive LIST of the thread's
writes plus one GET per task object.
"""

from __future__ import annotations

import asyncio
from typing import Any

from ...format import layout
from ...format.manifest import seal, unseal
from ...storage import ObjectStore
from .encoding import SerdeCodec

WRITES_ROOT = f"{layout.LANGGRAPH}/writes"
Entry = tuple[str, int, str, Any, str]  # task_id, idx, channel, blob, task_path


def thread_prefix(archive_thread_id: str) -> str:
    return f"{WRITES_ROOT}/{layout.encode_id(archive_thread_id, 'thread_id')}"


def checkpoint_prefix(archive_thread_id: str, checkpoint_id: str) -> str:
    return f"{thread_prefix(archive_thread_id)}/{layout.encode_id(checkpoint_id, 'checkpoint_id')}"


def _doc(archive_thread_id: str, checkpoint_id: str, task_id: str, task_path: str, entries: list[list[Any]]) -> bytes:
    return seal(
        {
            "type": "langgraph_writes",
            "thread": archive_thread_id,
            "checkpoint_id": checkpoint_id,
            "task_id": task_id,
            "task_path": task_path,
            "writes": entries,  # [idx, channel, [type, b64]]
        }
    )


async def put_writes(
    store: ObjectStore,
    archive_thread_id: str,
    checkpoint_id: str,
    task_id: str,
    task_path: str,
    regular: list[list[Any]],
    special: list[list[Any]],
) -> None:
    prefix = checkpoint_prefix(archive_thread_id, checkpoint_id)
    task = layout.encode_id(task_id, "task_id")
    jobs = [
        store.put(
            f"{prefix}/{task}.special{e[0]}.json",
            _doc(archive_thread_id, checkpoint_id, task_id, task_path, [e]),
        )
        for e in special
    ]
    if regular:
        jobs.append(
            _put_regular(store, f"{prefix}/{task}.json", archive_thread_id, checkpoint_id, task_id, task_path, regular)
        )
    await asyncio.gather(*jobs)


async def _put_regular(
    store: ObjectStore,
    key: str,
    archive_thread_id: str,
    checkpoint_id: str,
    task_id: str,
    task_path: str,
    entries: list[list[Any]],
) -> None:
    if await store.put_if_absent(key, _doc(archive_thread_id, checkpoint_id, task_id, task_path, entries)):
        return
    old = unseal(await store.get(key), f"writes {key!r}")
    have = {e[0] for e in old["writes"]}
    extra = [e for e in entries if e[0] not in have]
    if extra:
        merged = sorted(old["writes"] + extra, key=lambda e: e[0])
        await store.put(key, _doc(archive_thread_id, checkpoint_id, task_id, old.get("task_path", task_path), merged))


async def read_entries(store: ObjectStore, archive_thread_id: str, checkpoint_id: str) -> list[Entry]:
    """Every stored write of the checkpoint, in ``writes_sort_key`` order (task_path, task_id, idx)."""
    prefix = checkpoint_prefix(archive_thread_id, checkpoint_id)
    names = [n for n in await store.list_dir(prefix) if n.endswith(".json")]
    return _entries([f"{prefix}/{n}" for n in names], await store.get_many([f"{prefix}/{n}" for n in names]))


async def index_thread(store: ObjectStore, archive_thread_id: str) -> dict[str, list[str]]:
    """Keys of every write object of an archive thread, by checkpoint folder (one recursive LIST)."""
    out: dict[str, list[str]] = {}
    for key in sorted(await store.find(thread_prefix(archive_thread_id))):
        folder, _, name = key.rpartition("/")
        if name.endswith(".json"):
            out.setdefault(folder, []).append(key)
    return out


async def read_many(
    store: ObjectStore,
    archive_thread_id: str,
    checkpoint_ids: list[str],
    index: dict[str, list[str]] | None = None,
) -> dict[str, list[Entry]]:
    """``read_entries`` of several checkpoints of one thread, concurrently; with ``index``
    (``index_thread``'s answer) no LIST at all."""
    if index is None:
        found = await asyncio.gather(*(read_entries(store, archive_thread_id, c) for c in checkpoint_ids))
        return dict(zip(checkpoint_ids, found, strict=True))
    keys = {c: index.get(checkpoint_prefix(archive_thread_id, c), []) for c in checkpoint_ids}
    flat = [k for ks in keys.values() for k in ks]
    datas = dict(zip(flat, await store.get_many(flat), strict=True))
    return {c: _entries(ks, [datas[k] for k in ks]) for c, ks in keys.items()}


def _entries(keys: list[str], datas: list[bytes | None]) -> list[Entry]:
    out: list[Entry] = []
    for key, data in zip(keys, datas, strict=True):
        if data is None:  # deleted between LIST and GET
            continue
        doc = unseal(data, f"writes {key}")
        for idx, channel, blob in doc["writes"]:
            out.append((doc["task_id"], int(idx), channel, blob, doc.get("task_path", "")))
    out.sort(key=lambda e: (e[4], e[0], e[1]))
    return out


def decode(codec: SerdeCodec, entries: list[Entry]) -> list[tuple[str, str, Any]]:
    return [(task_id, channel, codec.loads(blob)) for task_id, _, channel, blob, _ in entries]


async def copy_entries(store: ObjectStore, src_thread: str, dst_thread: str, checkpoint_id: str) -> None:
    """Copy a checkpoint's write objects to another archive thread (rewriting their thread field)."""
    prefix = checkpoint_prefix(src_thread, checkpoint_id)
    dst = checkpoint_prefix(dst_thread, checkpoint_id)
    names = [n for n in await store.list_dir(prefix) if n.endswith(".json")]
    datas = await store.get_many([f"{prefix}/{n}" for n in names])
    jobs = []
    for name, data in zip(names, datas, strict=True):
        if data is None:
            continue
        doc = unseal(data, f"writes {prefix}/{name}")
        body = _doc(dst_thread, checkpoint_id, doc["task_id"], doc.get("task_path", ""), doc["writes"])
        jobs.append(store.put(f"{dst}/{name}", body))
    await asyncio.gather(*jobs)


async def delete_checkpoint(store: ObjectStore, archive_thread_id: str, checkpoint_id: str) -> None:
    await store.delete_prefix(checkpoint_prefix(archive_thread_id, checkpoint_id))


async def delete_thread(store: ObjectStore, archive_thread_id: str) -> None:
    await store.delete_prefix(thread_prefix(archive_thread_id))
