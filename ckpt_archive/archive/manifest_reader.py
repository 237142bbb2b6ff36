"""Reading a thread's manifest: the head hint, the folded manifest and the commit log after it.

A cached manifest is brought up to date by probing ``seq+1`` (normally one 404);
without one it is rebuilt from the hint (no LIST) and the commits it may trail by,
or from one LIST of the log when the hint is missing or unusable.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from ..errors import CorruptManifest, MissingObject, ObjectTooLarge, UnsupportedFormatVersion
from . import layout
from .manifest import HINT_LAG, Manifest, unseal
from .parts import read_folded
from .root import ArchiveRoot, manifest_ttl
from .schema import check_hint


class ManifestReader(ArchiveRoot):
    """The manifest layer of ``ArchiveCheckpointer`` (see ``_manifest``)."""

    async def _fold_forward(self, m: Manifest) -> Manifest:
        """Apply commits after ``m.seq`` until the first absent one (normally one 404)."""
        while True:
            data = await self.store.get_or_none(layout.log_key(m.thread_id, m.seq + 1))
            if data is None:
                return m
            if m is self._manifests.get(m.thread_id):
                m = m.copy()
            key = layout.log_key(m.thread_id, m.seq + 1)
            m.apply_entry(unseal(data, f"commit {m.seq + 1}", thread_id=m.thread_id, key=key, kind="commit entry"))

    @staticmethod
    async def _no_hint() -> None:
        return None

    async def _read_hint(self, thread_id: str) -> dict[str, Any] | None:
        try:
            data = await self.store.get_or_none(layout.head_key(thread_id))
            if data is None:
                return None
            doc = unseal(data, "head hint", thread_id=thread_id, kind="head hint")
            check_hint(doc, thread_id)
            return doc
        except (CorruptManifest, UnsupportedFormatVersion, ObjectTooLarge):
            return None  # only a hint: fall back to the log itself (verify reports it)

    async def _manifest(
        self, thread_id: str, *, hint: dict[str, Any] | None = None, hint_read: bool = False, cache: bool = True
    ) -> Manifest:
        """The thread's manifest, up to date with every commit made so far.

        ``hint``: the head hint the caller has just read; ``hint_read``: it read it, even if there was
        none (so it is not read twice). ``cache=False``: read it afresh and leave this instance's view of
        the thread as it was (gc, which reads every thread, and a save's check of its own commit)."""
        if cache:
            self._hint_heads.pop(thread_id, None)  # the caller now sees the newest head
        cached = self._manifests.get(thread_id) if cache else None
        if cached is not None and not self._fresh(thread_id):
            cached = None  # too old to trust: gc may have removed log entries after it
        if cached is not None:
            m = await self._fold_forward(cached)
        elif hint is not None:
            m = await self._rebuild(thread_id, hint, cache=cache)
        else:
            # Commit 1 is never collected (FORMAT.md §6), so no hint and no commit 1 means a thread
            # nobody has committed to: no LIST of the log for the first save of every thread.
            read_hint = self._no_hint() if hint_read else self._read_hint(thread_id)
            hint, first = await asyncio.gather(read_hint, self.store.get_or_none(layout.log_key(thread_id, 1)))
            empty = hint is None and first is None
            m = Manifest(thread_id) if empty else await self._rebuild(thread_id, hint, cache=cache)
        if not cache:
            return m
        self._manifests[thread_id] = m
        self._read_at[thread_id] = time.monotonic()
        return m

    def _fresh(self, thread_id: str) -> bool:
        """Was the cached manifest read (or written) within half the gc grace period?"""
        return time.monotonic() - self._read_at.get(thread_id, 0.0) <= manifest_ttl(self.gc_grace).total_seconds()

    async def _rebuild(self, thread_id: str, hint: dict[str, Any] | None, *, cache: bool = True) -> Manifest:
        if hint is not None:
            base_seq, last = hint.get("manifest_seq"), int(hint["seq"])
        else:  # no usable hint: one LIST of the log (recovery path only)
            names = await self.store.list_dir(f"{layout.thread_dir(thread_id)}/_log")
            folded = [int(n.split(".")[0]) for n in names if n.endswith(".manifest.json.zst")]
            commits = [int(n.split(".")[0]) for n in names if n.endswith(".json") and n[:20].isdigit()]
            base_seq = max(folded) if folded else None
            last = max(commits) if commits else 0
        start = base_seq or 0
        keys = [layout.log_key(thread_id, s) for s in range(start + 1, last + 1)]
        if base_seq:
            keys.insert(0, layout.manifest_key(thread_id, base_seq))
        # the commits a hint may trail by (HINT_LAG) and the one after are fetched with the others: the
        # last is usually absent, and then the manifest is known to be current without another round trip
        ahead = [last + 1 + i for i in range(HINT_LAG + 1)] if hint is not None else [last + 1]
        datas = await self.store.get_many([*keys, *(layout.log_key(thread_id, s) for s in ahead)])
        probes = datas[len(keys) :]
        del datas[len(keys) :]
        if base_seq:
            data = datas.pop(0)
            if data is None:  # folded manifest gone (gc): start over from the listing
                return await self._rebuild(thread_id, None, cache=cache) if hint is not None else Manifest(thread_id)
            key = layout.manifest_key(thread_id, base_seq)
            try:
                m = await read_folded(self.store, thread_id, data, f"manifest {base_seq}", key=key, seq=base_seq)
            except MissingObject:  # a part of an older fold already collected: use the newest fold
                if hint is None:
                    raise
                return await self._rebuild(thread_id, None, cache=cache)
            except CorruptManifest as exc:
                m, base_seq = await self._replay_to(thread_id, base_seq, exc)
        else:
            m = Manifest(thread_id)
        for seq, data in zip(range(start + 1, last + 1), datas, strict=True):
            key = layout.log_key(thread_id, seq)
            if data is None:
                if hint is not None:
                    return await self._rebuild(thread_id, None, cache=cache)
                raise MissingObject("commit entry is missing from the log", thread_id=thread_id, key=key)
            m.apply_entry(unseal(data, f"commit {seq}", thread_id=thread_id, key=key, kind="commit entry"))
        if cache:
            self._folded_seq[thread_id] = base_seq
        for seq, data in zip(ahead, probes, strict=True):
            if data is None:
                return m
            m.apply_entry(
                unseal(
                    data, f"commit {seq}", thread_id=thread_id, key=layout.log_key(thread_id, seq), kind="commit entry"
                )
            )
        return await self._fold_forward(m)

    async def _replay_to(self, thread_id: str, seq: int, error: CorruptManifest) -> tuple[Manifest, int | None]:
        """The manifest as of ``seq`` without its (corrupt) folded copy, where that is provably safe.

        Commit entries are immutable and individually sealed, so an older good folded
        manifest (or none) plus *every* commit up to ``seq`` gives exactly the state the
        corrupt copy held. If any of those commits is gone, nothing is guessed: ``error``.
        """
        names = await self.store.list_dir(f"{layout.thread_dir(thread_id)}/_log")
        bases = sorted(int(n[:20]) for n in names if n.endswith(".manifest.json.zst") and int(n[:20]) < seq)
        for base in [*reversed(bases), 0]:
            keys = [layout.log_key(thread_id, s) for s in range(base + 1, seq + 1)]
            if base:
                keys.insert(0, layout.manifest_key(thread_id, base))
            datas = await self.store.get_many(keys)
            if any(d is None for d in datas):
                continue
            try:
                if base:
                    first = datas.pop(0)
                    assert first is not None
                    what = f"manifest {base}"
                    m = await read_folded(self.store, thread_id, first, what, key=keys[0], seq=base)
                else:
                    m = Manifest(thread_id)
                for s, data in zip(range(base + 1, seq + 1), datas, strict=True):
                    assert data is not None
                    key = layout.log_key(thread_id, s)
                    m.apply_entry(unseal(data, f"commit {s}", thread_id=thread_id, key=key, kind="commit entry"))
            except (CorruptManifest, MissingObject):
                continue
            return m, base or None
        raise error
