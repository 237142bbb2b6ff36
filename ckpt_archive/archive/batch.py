"""Building many checkpoints of one thread at once: one manifest read, every object fetched once.

Callers that need the full state of many checkpoints (LangGraph's ``list`` returns every listed
checkpoint with its values) would otherwise pay, per checkpoint, an ``_ids/`` lookup, a manifest
probe and a fetch of its delta segment -- the same segment once for each of the checkpoints it
holds. Here the wanted checkpoints are built oldest first, so each is its parent's state plus one
delta, from objects fetched together in one concurrent batch and segments parsed once. Every state
is still checked against the digests its record carries, exactly as in a single load.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from .. import codec
from ..errors import CheckpointError
from ..model import CheckpointInfo
from . import layout
from .chains import ChainReader
from .content import Content
from .manifest import HINT_LAG, Manifest, Record, appended, hint_chain, record_info, unseal

if TYPE_CHECKING:
    from .checkpointer import ArchiveCheckpointer


async def head_guess(cp: ArchiveCheckpointer, thread_id: str) -> tuple[CheckpointInfo | None, dict[str, Any] | None]:
    """The thread's head as far as can be known before its manifest is read, and the head hint.

    From the manifest this instance has cached (no request), else from the head hint (one GET, run
    with the root check). A caller may start reads that depend on the head on this guess while
    ``listing(cp, thread_id, hint)`` confirms it; the guess is stale when another writer has
    committed since.
    """
    layout.thread_dir(thread_id)
    cached = cp._manifests.get(thread_id)
    if cached is not None and cp._fresh(thread_id):
        rec = cached.records.get(cached.head) if cached.head else None
        return (None if rec is None else record_info(thread_id, rec)), None
    hint = await cp._rooted(cp._read_hint(thread_id))
    chain = (hint or {}).get("chain") or []
    return (record_info(thread_id, chain[-1]) if chain else None), hint


def cached_head(cp: ArchiveCheckpointer, thread_id: str) -> CheckpointInfo | None:
    """The head of the manifest this instance holds (no request; it may be behind: a save against
    it then fails with ``CheckpointConflict`` rather than committing on a stale view)."""
    m = cp._manifests.get(thread_id)
    rec = m.records.get(m.head) if m is not None and m.head else None
    return None if rec is None else record_info(thread_id, rec)


async def head_from_hint(
    cp: ArchiveCheckpointer, thread_id: str, hint: dict[str, Any]
) -> tuple[Record, Content] | None:
    """The thread's head and its content from the hint, when the hint is current or trails the log by
    one appended delta (``HINT_LAG``: the commits after it are probed while the chain's objects are
    fetched); None when the log has moved on otherwise."""
    chain, inline = hint_chain(hint)
    if not chain:
        return None
    seq, entry = int(hint["seq"]), hint.get("entry_sha256")
    logs = [layout.log_key(thread_id, seq + 1 + i) for i in range(HINT_LAG + 1)]
    if entry is not None:  # the hint went out with its commit: is that commit the one at seq?
        logs.insert(0, layout.log_key(thread_id, seq))
    reader = ChainReader(cp, thread_id)
    keys = reader.needed([chain])  # what the state cache does not hold
    probes, datas = await asyncio.gather(cp.store.get_many(logs), cp.store.get_many(keys))
    if entry is not None:
        own = probes.pop(0)
        if own is None or codec.sha256(own) != entry:  # its commit never landed, or lost the race
            return None
    reader.hold(keys, datas)
    if probes[0] is not None and probes[-1] is not None:
        return None
    content = await reader.content(chain, inline)
    if probes[0] is None:
        return chain[-1], content
    doc = unseal(probes[0], f"commit {seq + 1}", thread_id=thread_id, key=logs[0], kind="commit entry")
    found = appended(doc, thread_id, seq + 1, chain[-1]["id"])
    if found is None:
        return None
    rec, ops = found  # built on the content of its parent, just built
    return rec, await reader.content([*chain, rec], {**inline, rec["id"]: ops})


async def warm_head(cp: ArchiveCheckpointer, thread_id: str, hint: dict[str, Any]) -> None:
    """Build the head's content from the hint's chain into the state cache (keyed by record version),
    so that ``contents`` of that head then reads nothing. Run it alongside ``listing``; a failure here
    is left for the confirmed read to report."""
    chain, inline = hint_chain(hint)
    if chain:
        with contextlib.suppress(CheckpointError):
            await ChainReader(cp, thread_id).content(chain, inline)


async def listing(
    cp: ArchiveCheckpointer, thread_id: str, hint: dict[str, Any] | None = None, *, hint_read: bool = False
) -> tuple[Manifest, list[CheckpointInfo]]:
    """The thread's up-to-date manifest and its listing (``alist``), to pass on to ``contents``;
    ``hint`` is the head hint the caller has just read (``hint_read``: even if there was none)."""
    layout.thread_dir(thread_id)
    m = await cp._rooted(cp._manifest(thread_id, hint=hint, hint_read=hint_read))
    return m, [record_info(thread_id, rec) for rec in m.records.values()]


async def contents(
    cp: ArchiveCheckpointer, thread_id: str, checkpoint_ids: Iterable[str], m: Manifest | None = None
) -> dict[str, Content]:
    """(state, messages) of each checkpoint of ``thread_id`` named (unknown ids are left out).

    The returned values are shared with the archive's state cache: read them, never mutate them.
    ``m`` is the manifest ``listing`` just returned (no second probe of the log); otherwise it is
    read here.
    """
    if m is None:
        m = (await listing(cp, thread_id))[0]
    order = {cid: i for i, cid in enumerate(m.records)}
    wanted = sorted({c for c in checkpoint_ids if c in order}, key=order.__getitem__)
    reader = ChainReader(cp, thread_id)
    chains = [m.chain(cid) for cid in wanted]
    await reader.fetch(reader.needed(chains))  # one batch: each object once, for every chain
    return {cid: await reader.content(chain, m.inline) for cid, chain in zip(wanted, chains, strict=True)}
