"""Reads over an ``Engine``: loads, listings, threads, history, and many checkpoints of one thread at once.

``history`` walks the manifest in commit order with the one chain replay
(``ChainReader.each``): each state is built from the one it was saved against
(normally the previous one), so a thread of n checkpoints costs one GET per
object and n delta applications, not n replays.

Building many checkpoints of one thread at once (``contents``): one manifest read, every object
fetched once. Callers that need the full state of many checkpoints (LangGraph's ``list`` returns every listed
checkpoint with its values) would otherwise pay, per checkpoint, a manifest
probe and a fetch of its delta segment -- the same segment once for each of the checkpoints it
holds. Here the wanted checkpoints are built oldest first, so each is its parent's state plus one
delta, from objects fetched together in one concurrent batch and segments parsed once. Every state
is still checked against the digests its record carries, exactly as in a single load.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections.abc import AsyncIterator, Iterable, Mapping
from typing import Any

from .. import codec
from ..engine import Engine
from ..format import layout
from ..format.content import Content, Path, state_key
from ..format.manifest import (
    Manifest,
    Record,
    appended,
    hint_chain,
    hint_probes,
    next_window,
    record_info,
    unseal,
)

__all__ = [
    "cached_blobs",
    "cached_head",
    "contents",
    "delete",
    "head_from_hint",
    "head_guess",
    "head_info",
    "history",
    "infos",
    "infos_of",
    "listing",
    "load",
    "load_by_id",
    "manifest",
    "parts",
    "thread_folders",
    "threads",
    "warm_head",
]
from ..errors import CheckpointError, CheckpointNotFound, CorruptManifest, NeedsManifest
from ..model import Checkpoint, CheckpointInfo, check_identifier
from .save import parent_blobs


async def head_guess(engine: Engine, thread_id: str) -> tuple[CheckpointInfo | None, dict[str, Any] | None]:
    """The thread's head as far as can be known before its manifest is read, and the head hint.

    From the manifest this instance has cached (no request), else from the head hint (one GET, run
    with the root check). A caller may start reads that depend on the head on this guess while
    ``listing(engine, thread_id, hint)`` confirms it; the guess is stale when another writer has
    committed since.
    """
    layout.thread_dir(thread_id)
    if engine.log.cached(thread_id) is not None and engine.log.fresh(thread_id):
        return cached_head(engine, thread_id), None
    hint = await engine.root.rooted(engine.log.read_hint(thread_id))
    chain = (hint or {}).get("chain") or []
    return (record_info(thread_id, chain[-1]) if chain else None), hint


def cached_head(engine: Engine, thread_id: str) -> CheckpointInfo | None:
    """The head of the manifest this instance holds (no request; it may be behind: a save against
    it then fails with ``CheckpointConflict`` rather than committing on a stale view)."""
    m = engine.log.cached(thread_id)
    return None if m is None else head_info(m)


def cached_blobs(engine: Engine, thread_id: str, checkpoint_ids: Iterable[str | None]) -> set[str]:
    """Blob keys the chains of ``checkpoint_ids`` list in the manifest this instance holds, if it was
    read less than ``manifest_ttl`` ago (no request; empty otherwise, and for ids it does not hold):
    while such a record is in the thread, gc keeps every blob it lists (``ops.save.parent_blobs``)."""
    m = engine.log.cached(thread_id)
    if m is None or not engine.log.fresh(thread_id):
        return set()
    ids = [c for c in dict.fromkeys(checkpoint_ids) if c is not None and c in m.records]
    return set().union(*(parent_blobs(m, c) for c in ids))


async def head_from_hint(engine: Engine, thread_id: str, hint: dict[str, Any]) -> tuple[Record, Content] | None:
    """The thread's head and its content from the hint, when the hint is current or trails the log by a
    run of appended deltas (the commits after it are probed while the chain's objects are fetched:
    ``hint_probes``, a window of this process's ``Root.probe_window``; a window found whole is followed by a
    wider one, ``next_window``); None when the log has
    moved on otherwise (the caller reads the manifest)."""
    chain, inline = hint_chain(hint)
    if not chain:
        return None
    folder = layout.segments_dir(layout.thread_dir(thread_id))
    # the segments holding the lineage rows a snapshot replays lists from: fetched with the chain when
    # the hint's snapshot replays, or with a newer snapshot of the commits after the hint
    named = [f"{folder}/{name}" for name in hint.get("segments", [])]
    lineage = named if "replay" in chain[0]["ref"] else []
    seq, entry = int(hint["seq"]), hint["entry_sha256"]
    # the hint went out with its commit: is that commit the one at seq? (and the ones after it)
    window = engine.root.probe_window  # as far as this process's own writes let a hint trail
    logs = [layout.log_key(thread_id, s) for s in hint_probes(seq, window)]
    reader = engine.contents.reader(thread_id)
    keys = reader.needed([chain])  # what the state cache does not hold
    if lineage and reader.holds(chain[0]):
        lineage = []
    keys += [k for k in lineage if k not in keys]
    hints: list[Record] = [*chain]
    probes, datas = await asyncio.gather(engine.store.get_many(logs), engine.store.get_many(keys))
    own = probes.pop(0)
    if own is None or codec.sha256(own) != entry:  # its commit never landed, or lost the race
        return None
    reader.hold(keys, datas)
    run: list[bytes] = []
    while True:
        present = list(itertools.takewhile(lambda data: data is not None, probes))
        if any(data is not None for data in probes[len(present) :]):
            return None  # a gap in the log: the manifest says
        run += [d for d in present if d is not None]
        if len(present) < len(probes):
            break
        at, window = seq + len(run) + 1, next_window(window)  # the window was whole: the hint trails further
        probes = list(await engine.store.get_many([layout.log_key(thread_id, s) for s in hint_probes(at, window)[:-1]]))
    docs = [
        unseal(
            data, f"commit {seq + i}", thread_id=thread_id, key=layout.log_key(thread_id, seq + i), kind="commit entry"
        )
        for i, data in enumerate(run, 1)
    ]
    found = appended(docs, thread_id, seq + 1, chain[-1]["id"])
    if found is None:
        return None
    # a save's snapshot in the run (its hint and fold go out with the next commit) starts the chain
    # anew: its objects are read in one round trip more (3 in all), the hint's chain is not built
    full = [i for i, (rec, _) in enumerate(found) if rec["kind"] == "full"]
    hints += [rec for rec, _ in found]  # all of it: a snapshot's lineage runs through the commits before it
    inline = {**inline, **{rec["id"]: ops for rec, ops in found}}
    if full:
        chain, found = [found[full[-1]][0]], found[full[-1] + 1 :]
    replays = "replay" in chain[0]["ref"] and not reader.holds(chain[0])
    try:
        if replays:
            if "segments" not in hint:
                return None
            if not lineage:  # a snapshot of the run: its lineage with its own objects, one round trip
                lineage = named
                await reader.fetch(sorted({*reader.needed([chain]), *named}))
            reader.hinted(hints, {k: reader.object(k) for k in lineage}, chain[0].get("enc"))
        content = await reader.content(chain, inline)
    except NeedsManifest:  # its snapshot replays lists from ancestors the hint does not hold
        return None
    except CheckpointError:
        if not replays:
            raise
        return None  # what the hint's segments replayed failed a check: the manifest's read says why
    for rec, _ in found:  # each delta built on its parent's content, just built, and checked
        chain = [*chain, rec]
        content = await reader.content(chain, inline)
    return chain[-1], content


async def warm_head(engine: Engine, thread_id: str, hint: dict[str, Any]) -> None:
    """Build the head's content from the hint's chain into the state cache (keyed by record version),
    so that ``contents`` of that head then reads nothing. Run it alongside ``listing``; a failure here
    is left for the confirmed read to report."""
    chain, inline = hint_chain(hint)
    if chain:
        with contextlib.suppress(CheckpointError):
            await engine.contents.reader(thread_id).content(chain, inline)


async def manifest(
    engine: Engine, thread_id: str, hint: dict[str, Any] | None = None, *, hint_read: bool = False
) -> Manifest:
    """The thread's up-to-date manifest (one probe of the log when this instance holds it), with the
    root check; ``hint`` is the head hint the caller has just read (``hint_read``: even if there was
    none). No record is turned into a ``CheckpointInfo``: a caller that wants only the head builds one."""
    layout.thread_dir(thread_id)
    return await engine.root.rooted(engine.log.manifest(thread_id, hint=hint, hint_read=hint_read))


def head_info(m: Manifest) -> CheckpointInfo | None:
    """The listing entry of the manifest's head (O(1): the other records are not built)."""
    rec = m.records.get(m.head) if m.head else None
    return None if rec is None else record_info(m.thread_id, rec)


async def listing(
    engine: Engine, thread_id: str, hint: dict[str, Any] | None = None, *, hint_read: bool = False
) -> tuple[Manifest, list[CheckpointInfo]]:
    """The thread's up-to-date manifest and its listing (``alist``), to pass on to ``contents``;
    ``hint`` is the head hint the caller has just read (``hint_read``: even if there was none)."""
    m = await manifest(engine, thread_id, hint, hint_read=hint_read)
    return m, infos_of(m)


def infos_of(m: Manifest) -> list[CheckpointInfo]:
    """Every record of the manifest as its listing entry, in commit order (O(records))."""
    return [record_info(m.thread_id, rec) for rec in m.records.values()]


async def contents(
    engine: Engine, thread_id: str, checkpoint_ids: Iterable[str], m: Manifest | None = None
) -> dict[str, Content]:
    """(state, messages) of each checkpoint of ``thread_id`` named (unknown ids are left out).

    The returned values are shared with the archive's state cache: read them, never mutate them.
    ``m`` is the manifest ``listing`` just returned (no second probe of the log); otherwise it is
    read here.
    """
    if m is None:
        m = await manifest(engine, thread_id)
    order = {cid: i for i, cid in enumerate(m.records)}
    wanted = sorted({c for c in checkpoint_ids if c in order}, key=order.__getitem__)
    reader = engine.contents.reader(thread_id, m=m)
    chains = [m.chain(cid) for cid in wanted]
    await reader.fetch(reader.needed(chains))  # one batch: each object once, for every chain
    return {cid: await reader.content(chain, m.inline) for cid, chain in zip(wanted, chains, strict=True)}


async def parts(
    engine: Engine, thread_id: str, wanted: Mapping[str, Iterable[Path]], m: Manifest | None = None
) -> dict[str, dict[Path, Any]]:
    """Parts of the states of several checkpoints of ``thread_id`` (checkpoint id -> the paths wanted of
    its state -> the value there, None when absent; unknown ids left out), from the engine's part cache
    (``Contents.part``); the states it does not hold are built together (``contents``: one walk, each
    object once) and only the wanted parts are kept. What a walk over many ancestors reads of each (a
    LangGraph history: carried writes, a seed) without keeping every state. Shared: read only."""
    if m is None:
        m = await manifest(engine, thread_id)
    out: dict[str, dict[Path, Any]] = {}
    build: list[str] = []
    for cid, paths in wanted.items():
        rec = m.records.get(cid)
        if rec is None:
            continue
        key = state_key(rec)
        got = out[cid] = {}
        for path in dict.fromkeys(paths):
            held, value = engine.contents.part(key, path)
            if not held:
                build.append(cid)
                break
            got[path] = value
    built = await contents(engine, thread_id, build, m) if build else {}
    for cid, (state, _) in built.items():
        key = state_key(m.records[cid])
        for path in dict.fromkeys(wanted[cid]):
            part: Any = state
            for name in path:
                part = part.get(name) if isinstance(part, dict) else None
            engine.contents.remember_part(key, path, part)
            out[cid][path] = part
    return out


# -- the protocol's reads ---------------------------------------------------------------
async def load(engine: Engine, thread_id: str) -> Checkpoint | None:
    """The thread's head: from the head hint when this instance holds no manifest of it (one round
    trip for a reader that never saw the thread), else from its manifest, brought up to date."""
    layout.thread_dir(thread_id)  # validates the id
    cached = engine.log.cached(thread_id)
    if cached is None:
        hint = await engine.root.rooted(engine.log.read_hint(thread_id))
        found = None if hint is None else await head_from_hint(engine, thread_id, hint)
        if found is not None:
            rec, content = found
            engine.log.hint_heads[thread_id] = rec["id"]  # the head this writer last read
            return engine.contents.checkpoint(thread_id, rec, content)
        m = await engine.log.manifest(thread_id, hint=hint, hint_read=True)
    else:
        await engine.root.check()
        m = await engine.log.manifest(thread_id)
    if m.head is None:
        return None
    rec = m.records[m.head]
    return engine.contents.checkpoint(thread_id, rec, await engine.contents.content_of(m, m.head))


async def load_by_id(engine: Engine, checkpoint_id: str) -> Checkpoint | None:
    found = await find(engine, checkpoint_id)
    if found is None:
        return None
    m, thread_id = found
    rec = m.records[checkpoint_id]
    return engine.contents.checkpoint(thread_id, rec, await engine.contents.content_of(m, checkpoint_id))


async def infos(engine: Engine, thread_id: str) -> list[CheckpointInfo]:
    return (await listing(engine, thread_id))[1]


async def threads(engine: Engine) -> list[str]:
    return sorted((await thread_folders(engine))[0])


async def thread_folders(engine: Engine) -> tuple[list[str], dict[str, CheckpointError]]:
    """(thread ids, {folder: why} for folders whose thread id cannot be read).

    A folder named by the sha256 of a long id is named by its head hint or, when the hint is
    unusable, by its first commit (never collected): a damaged document of one thread never
    hides the others. ``verify`` reports the folders left unnamed."""
    await engine.root.check()
    out, unnamed = [], {}
    for name in await engine.store.list_dir(""):
        if not name.startswith(layout.THREAD_PREFIX):
            continue
        try:
            thread = await folder_thread(engine, name)
        except CheckpointError as exc:
            unnamed[name] = exc
            continue
        if thread is not None:  # None: neither hint nor commit, nothing was ever committed there
            out.append(thread)
    return out, unnamed


async def folder_thread(engine: Engine, folder: str) -> str | None:
    """The thread id of a thread folder (``thread_id=<segment>``): decoded from its name, or for a
    hashed (long) id read from its hint or commit 1 (``_hashed_thread``: one or two GETs)."""
    thread = layout.decode_id(folder[len(layout.THREAD_PREFIX) :])
    return thread if thread is not None else await _hashed_thread(engine, folder)


async def _hashed_thread(engine: Engine, folder: str) -> str | None:
    """The thread id that a hashed folder's hint or first commit records (it must hash to the folder)."""
    failure: CheckpointError | None = None
    for what, kind, key in (
        ("head hint", "head hint", layout.folder_head_key(folder)),
        ("commit 1", "commit entry", layout.folder_log_key(folder, 1)),
    ):
        data = await engine.store.get_or_none(key)  # the commit only when the hint does not do
        if data is None:
            continue
        try:
            thread = unseal(data, f"{what} in {folder!r}", key=key, kind=kind).get("thread_id")
            if isinstance(thread, str) and thread and layout.thread_dir(thread) == folder:
                return thread
            raise CorruptManifest(f"{what} names another thread ({thread!r})", key=key)
        except CheckpointError as exc:
            failure = failure or exc
    if failure is not None:
        raise failure
    return None


async def delete(engine: Engine, thread_id: str) -> None:
    await engine.log.settle(thread_id)  # no idle hint of this writer lands in the folder after it
    await engine.root.check()
    m = await engine.log.manifest(thread_id)
    await engine.store.delete_prefix(layout.thread_dir(thread_id))
    engine.log.forget(thread_id)
    engine.contents.forget(m.records.values())


async def history(engine: Engine, thread_id: str) -> AsyncIterator[Checkpoint]:
    """Every checkpoint of the thread, oldest first, with its full state (lazily)."""
    layout.thread_dir(thread_id)
    await engine.root.check()
    m = await engine.log.manifest(thread_id)
    async for rec, content in engine.contents.reader(thread_id, m=m, walk=True).each(m):
        assert content is not None  # a strict replay raises instead
        yield engine.contents.checkpoint(thread_id, rec, content)


SCAN_CONCURRENCY = 16
"""Manifests a look-up of a foreign checkpoint id reads at once (``find``)."""


async def find(engine: Engine, checkpoint_id: str) -> tuple[Manifest, str] | None:
    """The manifest of the thread holding ``checkpoint_id`` and that thread; None when no thread holds
    it. There is no id index (spec.md section 8); looked for, in order:

    1. in the manifests this instance holds (no request but the probe that brings the one holding it up
       to date): an id this process saved, listed or loaded before; or in the thread an earlier look-up
       found it in (``ThreadLog.found_ids``);
    2. in the thread a minted id names (``ids.mint_checkpoint_id``): a cold load by such an id is the
       thread's manifest read (hint and commit 1 with the root check, then the log: 2 round trips,
       one GET more for a hashed thread folder) and the chain's objects, 0 LIST;
    3. otherwise (a foreign id: LangGraph's, a user's; or a minted id saved into another thread) in
       every thread: one LIST of the root, then each thread's manifest, ``SCAN_CONCURRENCY`` at once,
       uncached (memory stays bounded). That costs one manifest read per thread, also to learn that
       an id is in none: callers that know the thread pass it (``load(thread_id)``, ``list``).

    Ids are unique within a thread; the same foreign id saved into two threads is found in the first
    thread of the listing's (name) order that holds it."""
    check_identifier(checkpoint_id, "checkpoint_id")
    known = [t for t, cached in engine.log.manifests.items() if checkpoint_id in cached.records]
    if checkpoint_id in engine.log.found_ids:
        known.append(engine.log.found_ids[checkpoint_id])
    for thread_id in known:
        m = await engine.root.rooted(engine.log.manifest(thread_id))
        if checkpoint_id in m.records:
            return m, thread_id
    named = layout.minted_thread_dir(checkpoint_id)

    async def in_named() -> tuple[Manifest, str] | None:
        thread_id = None if named is None else await folder_thread(engine, named)
        if thread_id is None:
            return None
        m = await engine.log.manifest(thread_id)
        return (m, thread_id) if checkpoint_id in m.records else None

    failures: list[CheckpointError] = []
    try:
        found = await engine.root.rooted(in_named())  # with the root check: one round trip, not two
    except CheckpointError as exc:
        await engine.root.check()  # an archive-level failure is raised as it is (checked once when fine)
        found, failures = None, [exc]  # the named thread does not read: the others may still hold the id
    if found is not None:
        return found
    folders = sorted(n for n in await engine.store.list_dir("") if n.startswith(layout.THREAD_PREFIX) and n != named)
    gate = asyncio.Semaphore(SCAN_CONCURRENCY)

    async def holds(folder: str) -> tuple[Manifest, str] | None:
        async with gate:
            try:
                thread = await folder_thread(engine, folder)
                m = None if thread is None else await engine.log.manifest(thread, cache=False)
            except CheckpointError as exc:  # a damaged thread never hides the others
                failures.append(exc)
                return None
            return (m, thread) if m is not None and thread is not None and checkpoint_id in m.records else None

    for found in await asyncio.gather(*(holds(f) for f in folders)):
        if found is not None:
            engine.log.found(checkpoint_id, found[1])
            return found
    if failures:  # it may be in a thread that does not read: say so rather than "no such checkpoint"
        raise failures[0]
    return None


async def locate(engine: Engine, checkpoint_id: str) -> tuple[Manifest, str]:
    """``find``, for operations on the checkpoint: CheckpointNotFound when no thread holds it."""
    found = await find(engine, checkpoint_id)
    if found is None:
        raise CheckpointNotFound(f"checkpoint {checkpoint_id!r} does not exist in this archive")
    return found
