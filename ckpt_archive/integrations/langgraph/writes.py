"""Pending writes of LangGraph checkpoints: one sealed object per ``put_writes`` call, then carried.

Layout (under the archive root, spec.md section 11)::

    _langgraph/writes/<enc archive thread>/<enc langgraph checkpoint id>/<uuid7>[.<blob>...].json.zst

A large string of a write (``limits.BLOB_MIN_BYTES``) is stored as a blob, by the archive's one encoding
(``Contents.stored``), and the object's name lists the blobs it references (at most
``layout.WRITES_NAME_BLOBS``; a call with more keeps them inline): a write object is no record, and gc
keeps the blobs that names in its listing list (spec.md section 10, rule 5).

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
import time
from collections.abc import Iterable
from typing import Any, Protocol

from ... import codec as C
from ... import limits
from ...errors import CheckpointError, IntegrityError, TruncatedObject
from ...format import blobs, crypto, layout
from ...format.crypto import Encryption
from ...format.langgraph import Entry as Entry
from ...format.langgraph import Obj as Obj
from ...format.langgraph import Objects as Objects
from ...format.langgraph import carried as carried  # the pure part of the writes' format: its home
from ...format.langgraph import checked as _checked
from ...format.langgraph import merge as merge
from ...format.manifest import seal, unseal
from ...model import uuid7
from ...storage import ObjectStore

Keys = frozenset[str] | set[str]


class Contents(Protocol):
    """What write objects need of the archive (``ArchiveCheckpointer`` is one): its store, its one
    encoding of stored values (``stored``/``aunstored``: blobs, keyed and sealed when encrypted), and
    the ttl of the manifests ``known_blobs`` answers from. The archive's public API only: no engine."""

    @property
    def store(self) -> ObjectStore: ...

    @property
    def encryption(self) -> Encryption | None: ...

    @property
    def manifest_ttl(self) -> float: ...

    def stored(
        self, value: Any, known: Keys = ..., *, most: int | None = None
    ) -> tuple[Any, list[str], list[tuple[str, bytes]]]: ...

    async def aunstored(self, held: list[tuple[Any, dict[str, Any], str]]) -> list[Any]: ...

    def held(self, key: str) -> tuple[bool, Any]: ...

    def hold(self, key: str, value: Any) -> None: ...


WRITES_ROOT = layout.LANGGRAPH_WRITES
KIND = "langgraph writes"
SUFFIX = layout.LANGGRAPH_WRITES_SUFFIX
CARRY_BYTES = 1024 * 1024
"""The most base64 text of its parent's writes a put carries in its state; a parent with more keeps them
as objects only (read apart, never collected)."""

Docs = dict[str, tuple[Obj, dict[str, Any] | None]]  # object name -> its writes as stored, the key they name


def _doc(archive_thread_id: str, checkpoint_id: str, obj: Obj, enc: dict[str, Any] | None = None) -> bytes:
    """A write object's bytes; ``obj`` as stored (``Contents.stored``: its large strings blob
    references), ``enc`` the key its references' names are keyed digests under (an encrypted archive)."""
    doc: dict[str, Any] = {
        "type": "langgraph_writes",
        "thread": archive_thread_id,
        "checkpoint_id": checkpoint_id,
        "task_id": obj[0],
        "task_path": obj[1],
        "writes": obj[2],  # [idx, channel, <cell>]
    }
    if enc is not None:
        doc["enc"] = enc
    raw = seal(doc)
    # readers refuse a writes object over its kind's bounds: never write one
    limits.check_written(
        KIND, raw, f"pending writes of task {obj[0]!r}", "keep large values (files, blobs) out of channel writes"
    )
    return C.compress(raw, hot=True)  # one per put_writes call (codec.HOT_LEVEL)


async def put(
    contents: Contents,
    archive_thread_id: str,
    checkpoint_id: str,
    task_id: str,
    task_path: str,
    entries: list[Any],
    known: Keys = frozenset(),
) -> tuple[str, Obj]:
    """One ``put_writes`` call: its blobs (large strings, ``Contents.stored``: the one encoding), then
    one put-if-absent of a fresh name that lists them (``layout.writes_name``: gc keeps them from its
    listing); the name and the writes as given.

    ``known``: blob keys a record of the checkpoint's chain lists in a manifest read less than
    ``manifest_ttl`` ago, not written first (as a save skips its parent chain's): a record removed
    since tombstoned them, and gc keeps a blob tombstoned less than its grace (at least two ttl) ago.
    A call slower than half a ttl writes them after its object, as a slow save does (``save.confirm``)."""
    started = time.monotonic()
    obj: Obj = [task_id, task_path, entries]
    stored, blob_names, blob_objects = contents.stored(entries, most=layout.WRITES_NAME_BLOBS)
    enc = contents.encryption
    key_id = {"alg": crypto.ALG, "key_id": enc.active_key_id} if enc is not None and blob_names else None
    body = _doc(archive_thread_id, checkpoint_id, [task_id, task_path, stored], key_id)
    store = contents.store
    await asyncio.gather(*(store.put(k, d) for k, d in blob_objects if k not in known))  # before the object
    while True:  # a uuid7 is new unless another process minted the same one in the same ms
        name = layout.writes_name(uuid7(), blob_names)
        if await store.put_if_absent(layout.writes_key(archive_thread_id, checkpoint_id, name), body):
            break
    if time.monotonic() - started > contents.manifest_ttl / 2:
        await asyncio.gather(*(store.put(k, d) for k, d in blob_objects if k in known))
    return name, obj


def _name_of(key: str) -> str | None:
    name = key.rpartition("/")[2]
    return name if name.endswith(SUFFIX) else None


async def names(store: ObjectStore, archive_thread_id: str, checkpoint_id: str) -> list[str]:
    """The objects of one checkpoint (one LIST of its folder)."""
    listed = await store.list_dir(layout.writes_dir(archive_thread_id, checkpoint_id))
    return [n for n in listed if n.endswith(SUFFIX)]


async def index_thread(store: ObjectStore, archive_thread_id: str) -> dict[str, list[str]]:
    """Objects of every checkpoint of an archive thread, by checkpoint folder (one recursive LIST)."""
    out: dict[str, list[str]] = {}
    for key in sorted(await store.find(layout.writes_thread_dir(archive_thread_id))):
        folder, _, name = key.rpartition("/")
        if _name_of(key) is not None:
            out.setdefault(folder, []).append(name)
    return out


async def _stored(store: ObjectStore, archive_thread_id: str, checkpoint_id: str, wanted: Iterable[str]) -> Docs:
    """The named objects of a checkpoint as stored (one GET each, concurrently), checked, their blob
    references unresolved; one deleted since it was listed (collected: a state carries it) is left out."""
    keys = {name: layout.writes_key(archive_thread_id, checkpoint_id, name) for name in wanted}
    out: Docs = {}
    for (name, key), data in zip(keys.items(), await store.get_many(list(keys.values())), strict=True):
        if data is None:
            continue
        doc = unseal(data, f"writes {key!r}", key=key, kind=KIND)
        if doc.get("type") != "langgraph_writes" or (doc.get("thread"), doc.get("checkpoint_id")) != (
            archive_thread_id,
            checkpoint_id,
        ):
            raise CheckpointError(f"writes {key!r} belong to another checkpoint; delete the object")
        enc = doc.get("enc")
        if enc is not None and not (
            type(enc) is dict and enc.keys() == {"alg", "key_id"} and type(enc["key_id"]) is str
        ):
            raise TruncatedObject("writes name their key malformed; delete the object", key=key)
        out[name] = _checked([doc.get("task_id"), doc.get("task_path", ""), doc.get("writes")], repr(key)), enc
    return out


async def fetch(contents: Contents, archive_thread_id: str, checkpoint_id: str, wanted: Iterable[str]) -> Objects:
    """The named objects of a checkpoint (``_stored``), their blob references resolved
    (``Contents.aunstored``: one batch of GETs for all of them). An object referencing other blobs than
    its name lists is refused (``TruncatedObject``): gc keeps only those its name lists. An object is
    immutable under its name (a uuid7 per call), so one read before is served from the archive's cache
    (``Contents.held``: bounded, shared by every saver and reader on the archive)."""
    out: Objects = {}
    missing = []
    wanted = list(wanted)
    for name in wanted:
        known, obj = contents.held(layout.writes_key(archive_thread_id, checkpoint_id, name))
        if known:
            out[name] = obj
        else:
            missing.append(name)
    if not missing:
        return out
    docs = await _stored(contents.store, archive_thread_id, checkpoint_id, missing)
    held = []
    for name, (obj, enc) in docs.items():
        key = layout.writes_key(archive_thread_id, checkpoint_id, name)
        try:
            refs = sorted(blobs.names(obj[2], sealed=enc is not None))
        except IntegrityError as exc:
            raise TruncatedObject(str(exc), checkpoint_id=checkpoint_id, key=key) from None
        if refs != layout.writes_blob_names(name):
            raise TruncatedObject("writes reference other blobs than their name lists; delete the object", key=key)
        held.append((obj[2], {"id": checkpoint_id, **({"enc": enc} if enc is not None else {})}, key))
    values = await contents.aunstored(held)
    for (name, (obj, _)), v in zip(docs.items(), values, strict=True):
        out[name] = [obj[0], obj[1], v]
        contents.hold(layout.writes_key(archive_thread_id, checkpoint_id, name), out[name])
    return {name: out[name] for name in wanted if name in out}


async def read_folder(contents: Contents, archive_thread_id: str, checkpoint_id: str) -> Objects:
    """Every object of one checkpoint: one LIST, then one GET each (and one per blob they reference)."""
    listed = await names(contents.store, archive_thread_id, checkpoint_id)
    return await fetch(contents, archive_thread_id, checkpoint_id, listed)


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


def decode(codec: Any, entries: list[Entry]) -> list[tuple[str, str, Any]]:
    return [(task_id, channel, codec.decode_value(cell)) for task_id, _, channel, cell, _ in entries]


async def copy_entries(store: ObjectStore, src_thread: str, dst_thread: str, checkpoint_id: str) -> None:
    """Copy a checkpoint's objects to another archive thread, under the same names (rewriting their
    thread field), so that what the copied states carry and the copied objects stay one set. Copied as
    stored: the blobs they reference are the archive's, and the names that list them are kept."""
    found = await _stored(store, src_thread, checkpoint_id, await names(store, src_thread, checkpoint_id))
    await asyncio.gather(
        *(
            store.put(layout.writes_key(dst_thread, checkpoint_id, n), _doc(dst_thread, checkpoint_id, o, enc))
            for n, (o, enc) in found.items()
        )
    )


async def delete_checkpoint(store: ObjectStore, archive_thread_id: str, checkpoint_id: str) -> None:
    await store.delete_prefix(layout.writes_dir(archive_thread_id, checkpoint_id))


async def delete_thread(store: ObjectStore, archive_thread_id: str) -> None:
    await store.delete_prefix(layout.writes_thread_dir(archive_thread_id))
