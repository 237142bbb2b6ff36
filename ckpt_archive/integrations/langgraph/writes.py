"""Pending writes of LangGraph checkpoints: one sealed object per ``put_writes`` call, then carried.

Layout (under the archive root, spec.md section 11)::

    _langgraph/writes/<enc archive thread>/<enc langgraph checkpoint id>/<uuid7>.json.zst

Each ``put_writes`` call is ONE put-if-absent of a fresh name (a uuid7, so names sort in the order the
calls were made and two calls, concurrent tasks included, never write the same key) holding all its
writes, regular (``idx >= 0``) and special (ERROR, SCHEDULED, INTERRUPT, RESUME; ``idx < 0``) alike.
A checkpoint's writes are its objects merged in name order (``merge``): as in LangGraph's own savers a
``(task_id, idx)`` already stored is kept for regular writes, and a later special write replaces it.

The next checkpoint the saver puts in the thread carries its parent's objects, whole and by name, in
its own state (``state["writes"] = {<parent lg id>: {<name>: object}}``), compressed with its commit;
a reader that builds a checkpoint's state and its children's (``list``, history walks) thus has their
writes without a GET, and reads apart only the objects no state carries (the head's, writes that landed
after the child was put). Carried objects are collected by ``Maintenance.collect_writes`` once the
carrying commit is older than the archive's grace; until then, and forever if nothing carries them,
they are read as objects, so a process killed between ``put_writes`` and the next ``put`` loses nothing.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping
from typing import Any

from ... import codec as C
from ... import limits
from ...errors import CheckpointError
from ...format import blobs, layout
from ...format.manifest import seal, unseal
from ...model import uuid7
from ...storage import ObjectStore

WRITES_ROOT = layout.LANGGRAPH_WRITES
KIND = "langgraph writes"
SUFFIX = layout.LANGGRAPH_WRITES_SUFFIX
CARRY_BYTES = 1024 * 1024
"""The most base64 text of its parent's writes a put carries in its state; a parent with more keeps them
as objects only (read apart, never collected)."""

Entry = tuple[str, int, str, Any, str]  # task_id, idx, channel, blob, task_path
Obj = list[Any]  # [task_id, task_path, [[idx, channel, <cell>], ...]]: one put_writes call (cells: values.py)
Objects = dict[str, Obj]  # object name -> its writes


thread_prefix = layout.writes_thread_dir
checkpoint_prefix = layout.writes_dir


def _doc(archive_thread_id: str, checkpoint_id: str, obj: Obj) -> bytes:
    raw = seal(
        {
            "type": "langgraph_writes",
            "thread": archive_thread_id,
            "checkpoint_id": checkpoint_id,
            "task_id": obj[0],
            "task_path": obj[1],
            "writes": obj[2],  # [idx, channel, <cell>]
        }
    )
    # readers refuse a writes object over its kind's bounds: never write one
    limits.check_written(
        KIND, raw, f"pending writes of task {obj[0]!r}", "keep large values (files, blobs) out of channel writes"
    )
    return C.compress(raw)


def _checked(obj: Any, where: str) -> Obj:
    """An object's writes as stored (in its own object or carried by a state), checked for shape: whoever
    wrote the archive chose them, and a malformed one is a typed error naming where it was."""
    ok = type(obj) is list and len(obj) == 3 and type(obj[0]) is str and type(obj[1]) is str
    if ok and type(obj[2]) is list:
        for e in obj[2]:
            if not (type(e) is list and len(e) == 3 and type(e[0]) is int and type(e[1]) is str):
                ok = False
                break
    else:
        ok = False
    if not ok:
        raise CheckpointError(f"pending writes {where} are malformed: {str(obj)[:100]}; delete them")
    return obj  # type: ignore[no-any-return]


async def put(
    store: ObjectStore, archive_thread_id: str, checkpoint_id: str, task_id: str, task_path: str, entries: list[Any]
) -> tuple[str, Obj]:
    """One ``put_writes`` call: one put-if-absent of a fresh name; its name and what it holds."""
    obj: Obj = [task_id, task_path, entries]
    body = _doc(archive_thread_id, checkpoint_id, obj)
    while True:  # a uuid7 is new unless another process minted the same one in the same ms
        name = uuid7() + SUFFIX
        if await store.put_if_absent(layout.writes_key(archive_thread_id, checkpoint_id, name), body):
            return name, obj


def _name_of(key: str) -> str | None:
    name = key.rpartition("/")[2]
    return name if name.endswith(SUFFIX) else None


async def names(store: ObjectStore, archive_thread_id: str, checkpoint_id: str) -> list[str]:
    """The objects of one checkpoint (one LIST of its folder)."""
    listed = await store.list_dir(checkpoint_prefix(archive_thread_id, checkpoint_id))
    return [n for n in listed if n.endswith(SUFFIX)]


async def index_thread(store: ObjectStore, archive_thread_id: str) -> dict[str, list[str]]:
    """Objects of every checkpoint of an archive thread, by checkpoint folder (one recursive LIST)."""
    out: dict[str, list[str]] = {}
    for key in sorted(await store.find(thread_prefix(archive_thread_id))):
        folder, _, name = key.rpartition("/")
        if _name_of(key) is not None:
            out.setdefault(folder, []).append(name)
    return out


async def fetch(store: ObjectStore, archive_thread_id: str, checkpoint_id: str, wanted: Iterable[str]) -> Objects:
    """The named objects of a checkpoint (one GET each, concurrently); one deleted since it was listed
    (collected: a state carries it) is left out."""
    keys = {name: layout.writes_key(archive_thread_id, checkpoint_id, name) for name in wanted}
    out: Objects = {}
    for (name, key), data in zip(keys.items(), await store.get_many(list(keys.values())), strict=True):
        if data is None:
            continue
        doc = unseal(data, f"writes {key!r}", key=key, kind=KIND)
        if doc.get("type") != "langgraph_writes" or (doc.get("thread"), doc.get("checkpoint_id")) != (
            archive_thread_id,
            checkpoint_id,
        ):
            raise CheckpointError(f"writes {key!r} belong to another checkpoint; delete the object")
        out[name] = _checked([doc.get("task_id"), doc.get("task_path", ""), doc.get("writes")], repr(key))
    return out


async def read_folder(store: ObjectStore, archive_thread_id: str, checkpoint_id: str) -> Objects:
    """Every object of one checkpoint: one LIST, then one GET each."""
    return await fetch(store, archive_thread_id, checkpoint_id, await names(store, archive_thread_id, checkpoint_id))


def carried(state: Mapping[str, Any] | None, checkpoint_id: str, where: str) -> Objects:
    """The objects of ``checkpoint_id`` a state carries (``state["writes"]``), checked."""
    held = (state or {}).get("writes")
    if held is None:
        return {}
    if not isinstance(held, dict) or not isinstance(held.get(checkpoint_id, {}), dict):
        raise CheckpointError(f"pending writes carried by {where} are malformed; delete the checkpoint")
    return {str(n): _checked(o, f"{n!r} carried by {where}") for n, o in held.get(checkpoint_id, {}).items()}


def carry_size(objects: Objects) -> int:
    """Bytes of the values a state would carry inline: base64 text of serde cells, JSON text of the
    others as the archive stores them, a string of ``limits.BLOB_MIN_BYTES`` or more being a reference
    to its blob (``format.blobs``: the image a message holds is stored once however many carry it)."""
    return sum(_size(cell) for obj in objects.values() for _, _, cell in obj[2])


def _unnamed(raw: bytes) -> str:
    return "0" * 64  # only the reference's size matters here: no digest computed


def _size(cell: Any) -> int:
    if type(cell) is list and len(cell) == 2 and type(cell[1]) is str:
        return len(cell[1])
    return len(C.dumps(blobs.encode(cell, _unnamed)[0]))


def merge(objects: Mapping[str, Obj]) -> list[Entry]:
    """A checkpoint's writes from its objects, in ``(task_path, task_id, idx)`` order: objects apply in
    name (call) order; a regular ``(task_id, idx)`` keeps its first value, a special one its last."""
    found: dict[tuple[str, int], Entry] = {}
    for name in sorted(objects):
        task_id, task_path, writes = objects[name]
        for idx, channel, blob in writes:
            key = (task_id, idx)
            if idx >= 0 and key in found:
                continue
            found[key] = (task_id, idx, channel, blob, task_path)
    return sorted(found.values(), key=lambda e: (e[4], e[0], e[1]))


def decode(codec: Any, entries: list[Entry]) -> list[tuple[str, str, Any]]:
    return [(task_id, channel, codec.decode_value(cell)) for task_id, _, channel, cell, _ in entries]


async def copy_entries(store: ObjectStore, src_thread: str, dst_thread: str, checkpoint_id: str) -> None:
    """Copy a checkpoint's objects to another archive thread, under the same names (rewriting their
    thread field), so that what the copied states carry and the copied objects stay one set."""
    found = await read_folder(store, src_thread, checkpoint_id)
    await asyncio.gather(
        *(
            store.put(layout.writes_key(dst_thread, checkpoint_id, n), _doc(dst_thread, checkpoint_id, o))
            for n, o in found.items()
        )
    )


async def delete_checkpoint(store: ObjectStore, archive_thread_id: str, checkpoint_id: str) -> None:
    await store.delete_prefix(checkpoint_prefix(archive_thread_id, checkpoint_id))


async def delete_thread(store: ObjectStore, archive_thread_id: str) -> None:
    await store.delete_prefix(thread_prefix(archive_thread_id))
