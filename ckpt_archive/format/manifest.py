"""The manifest: a thread's commit log folded into its list of checkpoint records.

Pure data and logic, no I/O. Documents written here:

* commit entry ``_log/<seq>.json.zst`` -- ``{"format_version", "type": "commit", "thread_id",
  "seq", "committed_at", "actions": [...], "digest"}``; actions are ``add``
  (a record, plus its ``ops`` while the delta lives inline), ``compact``
  (inline deltas moved to a Parquet segment), and the maintenance actions
  ``remove`` (records leave the manifest), ``update`` (fields of a
  record replaced, e.g. a new full snapshot), ``tombstone`` (objects no record
  needs any more, with the time they became unreferenced) and ``purge``
  (tombstones whose objects ``gc`` deleted);
* folded manifest ``_log/<seq>.manifest.json.zst`` -- every record as of ``seq``;
* head hint ``_head.json.zst`` -- the latest seq the writer knew and the chain from
  the head back to its snapshot, so loading the latest needs no other manifest read.

Every document carries a ``digest`` (sha256 of its canonical JSON without the
digest), checked on read.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from .. import codec, limits, versions
from ..delta import Delta
from ..errors import (
    BrokenChain,
    CorruptManifest,
    IntegrityError,
    ObjectTooLarge,
    UnsupportedFormatVersion,
)
from ..model import CheckpointInfo
from . import actions as A
from . import layout
from .actions import Action
from .holders import Holders
from .schema import check_commit, check_folded, check_record

Record = dict[str, Any]


def seal(doc: dict[str, Any]) -> bytes:
    """Canonical JSON of ``doc`` as a document of ``versions.FORMAT_VERSION``, with a digest of itself, so
    a flipped byte is detected."""
    body = {k: v for k, v in doc.items() if k != "digest"}
    body["format_version"] = versions.FORMAT_VERSION
    return codec.dumps({**body, "digest": codec.sha256(codec.dumps(body))})


def unseal(
    data: bytes,
    what: str,
    *,
    thread_id: str | None = None,
    key: str | None = None,
    kind: str = "object",
) -> dict[str, Any]:
    """Parse a sealed document; CorruptManifest (naming thread and object) if it fails its digest.

    ``kind`` names the document's bound in ``limits.LIMITS`` and whether it is stored as one zstd
    frame (``layout.ZSTD_KINDS``): a frame declaring more than the bound is refused
    (``ObjectTooLarge``) before it is decompressed.

    Writers store the canonical JSON exactly, so any other bytes (even whitespace that would
    parse to the same document) are reported as corruption too.
    """
    try:
        raw = codec.decompress(data, what=what, kind=kind) if kind in layout.ZSTD_KINDS else data
        doc = codec.decode_document(raw, what)
        body = {k: v for k, v in doc.items() if k != "digest"}
        sealed = codec.stored_dumps(body, what)
    except (UnsupportedFormatVersion, ObjectTooLarge):
        raise
    except IntegrityError as exc:
        raise CorruptManifest(str(exc), thread_id=thread_id, key=key) from None
    if doc.get("digest") != codec.sha256(sealed) or codec.dumps(doc) != raw:
        raise CorruptManifest(f"{what} fails its digest check", thread_id=thread_id, key=key)
    if thread_id is not None and "thread_id" in doc and doc["thread_id"] != thread_id:
        raise CorruptManifest(f"{what} belongs to thread {doc['thread_id']!r}", thread_id=thread_id, key=key)
    return doc


def now_iso() -> str:
    return datetime.now(UTC).isoformat()


@dataclass
class Manifest:
    """A thread's records as of commit ``seq`` (0 = nothing committed)."""

    thread_id: str
    seq: int = 0
    records: dict[str, Record] = field(default_factory=dict)  # in commit order (a plain dict copies 30x faster)
    inline: dict[str, Delta] = field(default_factory=dict)
    head: str | None = None
    tombstones: dict[str, dict[str, Any]] = field(default_factory=dict)
    # sealed parts (see parts.py): part refs, ids stored in them, sealed ids changed since
    parts: list[dict[str, Any]] = field(default_factory=list)
    sealed: set[str] = field(default_factory=set)
    dirty: set[str] = field(default_factory=set)
    part_ids: list[list[str]] = field(default_factory=list)  # ids each part holds (parallel to ``parts``)
    run_from: int | None = field(default=None, compare=False)
    """The seq after which every commit applied is one plain ``add`` appended to the head before it
    (None: ``seq``, as folded or empty): a hint naming a fold at or after it says so (``appends``)."""
    holders: Holders | None = field(default=None, compare=False, repr=False)
    """The segments holding the records' history rows, counted as records change (``holders.py``;
    None: counted from ``records`` at construction)."""

    def __post_init__(self) -> None:
        if self.run_from is None:
            self.run_from = self.seq
        if self.holders is None:
            self.holders = Holders.of(self.records.values())

    @property
    def segments(self) -> dict[str, tuple[int, int]]:
        """Segment key -> (records holding history rows in it, its stored size): O(segments) to read."""
        assert self.holders is not None
        return self.holders.held

    def _set(self, checkpoint_id: str, record: Record | None) -> None:
        """The one way a record changes (None: it leaves), so ``holders`` counts what ``records`` holds."""
        assert self.holders is not None
        old = self.records.pop(checkpoint_id, None) if record is None else self.records.get(checkpoint_id)
        if record is not None:
            self.records[checkpoint_id] = record
        self.holders.swap(old, record)

    def copy(self) -> Manifest:
        return Manifest(
            self.thread_id,
            self.seq,
            dict(self.records),
            dict(self.inline),
            self.head,
            dict(self.tombstones),
            list(self.parts),
            set(self.sealed),
            set(self.dirty),
            list(self.part_ids),
            self.run_from,
            None if self.holders is None else self.holders.copy(),
        )

    def _touch(self, checkpoint_id: str) -> None:
        if checkpoint_id in self.sealed:
            self.dirty.add(checkpoint_id)

    # -- folding ---------------------------------------------------------------
    def apply_entry(self, doc: dict[str, Any]) -> None:
        if doc.get("type") != "commit" or doc.get("seq") != self.seq + 1:
            raise CorruptManifest(
                f"commit entry out of order: expected seq {self.seq + 1}, got {doc.get('seq')!r}",
                thread_id=self.thread_id,
            )
        if doc.get("thread_id", self.thread_id) != self.thread_id:
            raise CorruptManifest(
                f"commit {doc['seq']} belongs to thread {doc.get('thread_id')!r}", thread_id=self.thread_id
            )
        check_commit(doc, self.thread_id)
        plain = _plain_delta(doc.get("actions", []))
        if plain is None or plain["record"].get("parent") != self.head:
            self.run_from = doc["seq"]  # not one append to the head: a hint's run starts after it
        for action in doc.get("actions", []):
            kind = action.get("action")
            if not isinstance(kind, str) or kind not in A.ACTIONS:
                raise UnsupportedFormatVersion(
                    f"commit {doc['seq']} of thread {self.thread_id!r} has unknown action {kind!r}"
                )
            if kind in A.MAINTENANCE:
                self._apply_maintenance(kind, action)
            elif kind == A.ADD:
                record = action["record"]
                self._set(record["id"], None)  # a re-added id moves to the end, its old inline ops gone
                self.inline.pop(record["id"], None)
                self._set(record["id"], record)
                if holds_inline(record):
                    self.inline[record["id"]] = action.get("ops", [])
                self.head = record["id"]
            else:
                for cid, group in action["row_groups"].items():
                    rec = self.records.get(cid)
                    if rec is None:
                        continue
                    ref = {"type": "segment", "key": action["key"], "sha256": action["sha256"]}
                    ref.update(size=action["size"], row_group=group["row_group"])
                    if rec["kind"] == "full":  # its history rows moved; its snapshot did not
                        self._set(cid, {**rec, "rows": ref})
                    else:
                        if rec["ref"].get("blobs"):  # the ops moved, the blobs they reference did not
                            ref["blobs"] = rec["ref"]["blobs"]
                        self._set(cid, {**rec, "ref": ref, "bytes": group["bytes"]})
                    self._touch(cid)
                    self.inline.pop(cid, None)
                for cid in action.get("empty", []):
                    if cid in self.records:
                        field_name = "rows" if self.records[cid]["kind"] == "full" else "ref"
                        self._set(cid, {**self.records[cid], field_name: {"type": "empty"}})
                        self._touch(cid)
                    self.inline.pop(cid, None)
        self.seq = doc["seq"]

    def _apply_maintenance(self, kind: str, action: dict[str, Any]) -> None:
        if kind == A.REMOVE:
            for cid in action["ids"]:
                self._set(cid, None)
                self.inline.pop(cid, None)
                self._touch(cid)
            if self.head not in self.records:
                self.head = next(reversed(self.records)) if self.records else None
        elif kind == A.UPDATE:
            rec = self.records.get(action["id"])
            if rec is None:
                return
            changes = {k: v for k, v in action["set"].items() if k in A.UPDATABLE}
            new = {**rec, **changes}
            if new["kind"] == "delta":
                new.pop("rows", None)  # a delta's ops are its history rows
            self._set(action["id"], new)
            self._touch(action["id"])
            if ("ref" in changes or "rows" in changes) and not holds_inline(new):
                self.inline.pop(action["id"], None)
        elif kind == A.TOMBSTONE:
            for key, size in action["objects"].items():
                self.tombstones.setdefault(key, {"at": action["at"], "size": size})
        else:
            for key in action["keys"]:
                self.tombstones.pop(key, None)

    def referenced_keys(self) -> dict[str, int]:
        """Payload objects the records need: key -> size (snapshots, segments --
        those holding their history rows included --, and the archive-wide blobs they reference).

        Blob refs carry no size: they count 0 here (gc reports their real size).
        """
        out: dict[str, int] = {}
        for rec in self.records.values():
            out.update(ref_keys(rec))
        return out

    # -- documents -------------------------------------------------------------
    def commit_entry(self, actions: Sequence[Action]) -> bytes:
        """The next commit's sealed entry as stored (zstd); ``StateTooLarge`` if readers would refuse it."""
        return self.sealed_commit(actions)[1]

    def sealed_commit(self, actions: Sequence[Action]) -> tuple[dict[str, Any], bytes]:
        """The next commit's entry as a reader unseals it, and as stored (zstd); ``StateTooLarge`` if
        readers would refuse it. The document is parsed from the very JSON that was sealed and
        compressed (a private copy, sharing nothing with ``actions``), so the writer applies its own
        commit (``ThreadLog._attempt``) without decompressing and checking the bytes it just made:
        what it applies is what ``unseal`` of the stored bytes gives any reader, encrypted ops (their
        ``enc1:`` values sealed before the entry) included."""
        entry = seal(
            {
                "type": "commit",
                "thread_id": self.thread_id,
                "seq": self.seq + 1,
                "committed_at": now_iso(),
                "actions": list(actions),
            }
        )
        limits.check_written(
            "commit entry",
            entry,
            f"commit {self.seq + 1} of thread {self.thread_id!r}",
            "a save: keep large values (files, blobs) outside the checkpoint; maintenance: act on fewer "
            "checkpoints in one call (prune or remove them in batches)",
        )
        doc = codec.decode_document(entry, f"commit {self.seq + 1} of thread {self.thread_id!r}")
        return doc, codec.compress(entry, "commit entry", hot=True)  # one per save: codec.HOT_LEVEL

    def folded(self) -> bytes:
        """The folded manifest: part refs, then the records no part holds (or that changed since)."""
        tail = [r for cid, r in self.records.items() if cid not in self.sealed or cid in self.dirty]
        doc = {
            "type": "manifest",
            "thread_id": self.thread_id,
            "seq": self.seq,
            "head": self.head,
            "records": tail,
            "inline": self.inline,
            "tombstones": self.tombstones,
        }
        if self.parts:
            doc["parts"] = self.parts
            doc["removed"] = sorted(cid for cid in self.dirty if cid not in self.records)
        raw = seal(doc)
        limits.check_written("folded manifest", raw, f"folded manifest {self.seq} of thread {self.thread_id!r}")
        return codec.compress(raw, "folded manifest")

    @classmethod
    def from_folded(
        cls,
        data: bytes,
        what: str,
        parts: list[list[Record]] | None = None,
        *,
        thread_id: str | None = None,
        key: str | None = None,
        seq: int | None = None,
    ) -> Manifest:
        """Parse a folded manifest; ``parts`` are the records of its sealed parts, in order."""
        doc = unseal(data, what, thread_id=thread_id, key=key, kind="folded manifest")
        if doc.get("type") != "manifest" or (seq is not None and doc.get("seq") != seq):
            msg = f"{what} is not the folded manifest of seq {seq}"
            raise CorruptManifest(msg, thread_id=thread_id, key=key)
        tid = str(doc.get("thread_id")) if thread_id is None else thread_id
        check_folded(doc, tid, key)
        for part in parts or []:
            for rec in part:
                check_record(rec, tid, key)
        m = cls(doc["thread_id"], doc["seq"])
        m.parts = list(doc.get("parts", []))
        if len(parts or []) != len(m.parts):
            raise CorruptManifest(f"{what} names {len(m.parts)} sealed parts, {len(parts or [])} were read")
        removed = set(doc.get("removed", []))
        for part in parts or []:
            m.part_ids.append([rec["id"] for rec in part])
            for rec in part:
                m.sealed.add(rec["id"])
                if rec["id"] not in removed:
                    m.records[rec["id"]] = rec
        for rec in doc["records"]:  # overrides keep their place; new records append
            m.records[rec["id"]] = rec
            m._touch(rec["id"])
        m.dirty |= removed & m.sealed
        m.inline = dict(doc.get("inline", {}))
        m.head = doc.get("head")
        m.tombstones = dict(doc.get("tombstones", {}))
        m.holders = Holders.of(m.records.values())
        return m

    @staticmethod
    def part_refs(
        data: bytes, what: str, *, thread_id: str | None = None, key: str | None = None
    ) -> list[dict[str, Any]]:
        """The sealed parts a folded manifest needs (read them before ``from_folded``)."""
        parts = unseal(data, what, thread_id=thread_id, key=key, kind="folded manifest").get("parts", [])
        if not isinstance(parts, list):
            raise CorruptManifest(f"{what} has malformed part references", thread_id=thread_id, key=key)
        return parts

    def hint(self, manifest_seq: int | None, entry: bytes) -> bytes:
        """The head hint after commit ``seq``, whose entry is stored as ``entry``: the hint carries its
        sha256, so a reader can tell a hint of this commit from one whose commit never landed (a writer
        puts the hint alongside the commit, spec.md section 7). ``appends``: the commits after the fold
        it names are each one plain ``add`` of the chain's last records (``run_from``), so a reader takes
        them from the chain rather than from the log (``hint_appends``)."""
        chain = self.chain(self.head) if self.head else []
        doc = {
            "type": "head",
            "thread_id": self.thread_id,
            "seq": self.seq,
            "entry_sha256": codec.sha256(entry),
            "manifest_seq": manifest_seq,
            "chain": [self._with_ops(r) for r in chain],
        }
        names = self.segment_names()  # where lists a snapshot replays have their rows: no manifest needed
        if names:
            doc["segments"] = names
        run = self.seq - (manifest_seq or 0)  # commits since the fold named (or the first)
        if 1 < run <= len(chain) and self.run_from is not None and self.run_from <= (manifest_seq or 0):
            doc["appends"] = run  # each appended the next of the chain's last ``run`` records
        raw = seal(doc)
        limits.check_written("head hint", raw, f"head hint of thread {self.thread_id!r}")
        return codec.compress(raw, "head hint", hot=True)  # rewritten every few saves: codec.HOT_LEVEL

    def segment_names(self) -> list[str]:
        """The names (in the thread's ``deltas/``) of every segment holding a record's history rows:
        what a reader of the head hint alone fetches to replay the head snapshot's lists (spec.md
        section 7). O(segments), once per hint."""
        prefix = layout.segments_dir(layout.thread_dir(self.thread_id)) + "/"
        return sorted(key[len(prefix) :] for key in self.segments if key.startswith(prefix))

    def _with_ops(self, record: Record) -> Record:
        if record["ref"]["type"] == "inline" or (record["kind"] == "full" and holds_inline(record)):
            return {**record, "ops": self.inline.get(record["id"], [])}
        return record

    # -- chains ----------------------------------------------------------------
    def chain(self, checkpoint_id: str) -> list[Record]:
        """Records from the checkpoint's full snapshot to the checkpoint itself."""
        out: list[Record] = []
        cid: str | None = checkpoint_id
        while cid is not None:
            rec = self.records.get(cid)
            if rec is None:
                raise BrokenChain(
                    f"chain of {checkpoint_id!r} reaches {cid!r}, which is not in the manifest",
                    thread_id=self.thread_id,
                    checkpoint_id=checkpoint_id,
                )
            out.append(rec)
            if rec["kind"] == "full":
                out.reverse()
                return out
            if len(out) > 100_000:
                break
            cid = rec.get("parent")
        raise BrokenChain(
            "delta chain does not reach a full snapshot",
            thread_id=self.thread_id,
            checkpoint_id=checkpoint_id,
        )


def hint_chain(doc: dict[str, Any]) -> tuple[list[Record], dict[str, Delta]]:
    """The hint's chain as records and their inline ops (the hint itself is left as it is)."""
    chain, inline = [], {}
    for rec in doc.get("chain", []):
        if "ops" in rec:
            inline[rec["id"]] = rec["ops"]
        chain.append({k: v for k, v in rec.items() if k != "ops"})
    return chain, inline


def hint_appends(doc: dict[str, Any], thread_id: str) -> list[dict[str, Any]]:
    """The commit entries ``manifest_seq + 1 .. seq - 1`` a hint's ``appends`` stands for, rebuilt from its
    chain (each one plain ``add`` of the next of its last ``appends`` records, as ``actions.add`` writes
    it); none when the hint says nothing of them. Commit ``seq`` itself is read from the log: a reader
    uses these only once that entry's sha256 is ``entry_sha256`` (the hint's writer committed it)."""
    n, seq = doc.get("appends"), int(doc["seq"])
    if n is None:
        return []
    chain = doc.get("chain", [])
    first = seq - n + 1
    out = []
    for at, rec in zip(range(first, seq), chain[len(chain) - n : -1], strict=True):
        record = {k: v for k, v in rec.items() if k != "ops"}
        ops = rec.get("ops", []) if holds_inline(record) else None
        out.append({"type": "commit", "thread_id": thread_id, "seq": at, "actions": [A.add(record, ops)]})
    return out


MAX_WINDOW = 64
"""The most commits past a hint a reader probes in one round trip (``hint_probes``, ``next_window``)."""


def next_window(window: int) -> int:
    """The window a reader probes after one it found whole (every commit in it there): twice as wide, up
    to ``MAX_WINDOW``, so a hint ``k`` commits behind costs about ``log2(k / window)`` round trips more."""
    return min(2 * window, MAX_WINDOW)


def _plain_delta(actions: Sequence[Mapping[str, Any]]) -> Mapping[str, Any] | None:
    """The ``add`` action when ``actions`` only add one delta kept inline (or an empty one)."""
    if len(actions) != 1 or actions[0].get("action") != A.ADD:
        return None
    return actions[0] if actions[0]["record"]["ref"]["type"] in ("inline", "empty") else None


def hint_lags(seq: int, every: int, hinted: int | None) -> bool:
    """Is the newest hint this writer knows of (``hinted``: its seq; None: none known) ``every``
    commits or more behind commit ``seq``? Then ``seq`` puts the hint, whatever it is, so that after a
    clean save the hint trails by fewer than ``every`` commits (what a reader's window assumes)."""
    return hinted is None or seq - hinted >= every


def hint_due(seq: int, actions: Sequence[Mapping[str, Any]], every: int, hinted: int | None) -> bool:
    """Must the commit ``seq`` made of ``actions`` write the head hint beside it? A commit that writes
    other objects anyway (a snapshot; maintenance always publishes one) does; a plain delta
    (its one action adds an inline or empty delta) only when the hint lags (``hint_lags``). A save's
    compaction defers its hint to the next commit (``ThreadLog.commit``), unless it lags. The hint then
    trails the log by fewer than ``every`` commits after a clean save; readers apply them from the log."""
    return _plain_delta(actions) is None or hint_lags(seq, every, hinted)


def is_plain(actions: Sequence[Mapping[str, Any]]) -> bool:
    """Is a commit of ``actions`` plain (its one action adds a delta kept inline, or an empty one)?"""
    return _plain_delta(actions) is not None


def hint_probes(seq: int, window: int) -> list[int]:
    """The commits a reader of a hint at ``seq`` reads beside its chain, in one round trip: ``seq`` (is it
    the commit the hint went out with?) and the ``window`` after it (an absent one: nothing else
    followed). A reader's choice, not the format's (ckpt_archive: ``Root.probe_window``, the farthest its
    own writes let a hint trail, at most ``MAX_WINDOW``): how far a hint trails is each writer's, which
    changes what a reader pays (``next_window`` when the window is whole), never what it finds."""
    return [seq + i for i in range(min(max(window, 1), MAX_WINDOW) + 1)]


def _appended_full(actions: Sequence[Mapping[str, Any]]) -> Mapping[str, Any] | None:
    """The ``add`` action of a save's snapshot: one ``add`` of a full record, and otherwise only the
    ``compact`` that moved the thread's inline deltas into a segment and, when it merged segments, the
    ``update``s re-pointing records to the merged one and the ``tombstone`` of the merged-away ones
    (none of which changes a content)."""
    adds = [a for a in actions if a.get("action") == A.ADD]
    if len(adds) != 1 or not all(a.get("action") in (A.ADD, A.COMPACT, A.TOMBSTONE) or _repoint(a) for a in actions):
        return None
    return adds[0] if adds[0]["record"].get("kind") == "full" else None


def _repoint(action: Mapping[str, Any]) -> bool:
    """An ``update`` that only moves a record's history rows to a segment (``history.moved``)."""
    changes = action.get("set") if action.get("action") == A.UPDATE else None
    if not isinstance(changes, dict) or not changes.keys() <= {"ref", "rows", "bytes"}:
        return False
    return all(
        isinstance(changes.get(k), dict) and changes[k].get("type") == "segment"
        for k in ("ref", "rows")
        if k in changes
    )


def appended(docs: list[dict[str, Any]], thread_id: str, seq: int, head: str) -> list[tuple[Record, Delta]] | None:
    """(record, inline ops) of each of the commits ``seq, seq + 1, ...`` (``docs``, unsealed) when each
    only appended a record to the head the one before left (the first to ``head``): a delta, or a
    save's snapshot (its ops empty: a chain starts at it; its compaction moved only records before it);
    None when any is another commit (the caller then reads the manifest)."""
    out: list[tuple[Record, Delta]] = []
    for at, doc in enumerate(docs, seq):
        if doc.get("type") != "commit" or doc.get("seq") != at or doc.get("thread_id", thread_id) != thread_id:
            raise CorruptManifest(f"commit entry {at} is out of place (seq {doc.get('seq')!r})", thread_id=thread_id)
        check_commit(doc, thread_id)
        add = _plain_delta(doc["actions"]) or _appended_full(doc["actions"])
        if add is None or add["record"].get("parent") != head:
            return None
        full = add["record"]["kind"] == "full"
        out.append((add["record"], [] if full else list(add.get("ops", []))))
        head = add["record"]["id"]
    return out


def ref_keys(rec: Record, *, rows: bool = True) -> dict[str, int]:
    """The objects one record needs: key -> size (0 where the ref records none): its snapshot or
    segment, the archive-wide blobs its stored object references (``ref.blobs``) and (unless
    ``rows=False``: what a load reads) the segment holding a full record's history rows (``rows``).
    Everything that keeps objects alive (gc, tombstones, verify's orphans) counts the rows' segment."""
    ref = rec["ref"]
    sealed = "enc" in rec
    out = {layout.blob_key(name, sealed=sealed): 0 for name in ref.get("blobs", ())}
    held = rec.get("rows") if rows else None
    if isinstance(held, dict) and held.get("type") == "segment":
        out[held["key"]] = int(held.get("size", 0))
    if ref["type"] not in ("snapshot", "segment"):
        return out
    out[ref["key"]] = int(ref.get("size", 0))
    return out


def history_ref(rec: Record) -> dict[str, Any] | None:
    """Where a record's history rows are (spec.md section 4): a delta's ``ref`` (its ops are its history
    rows), a full record's ``rows``; None for a full record without them (verify reports it)."""
    if rec["kind"] == "delta":
        return dict(rec["ref"])
    held = rec.get("rows")
    return dict(held) if isinstance(held, dict) else None


def holds_inline(rec: Record) -> bool:
    """Are ops of ``rec`` inline in the commit log (a delta's, or a full record's history rows)?"""
    held = rec.get("rows")
    return rec["ref"]["type"] == "inline" or (isinstance(held, dict) and held.get("type") == "inline")


def record_info(thread_id: str, rec: Record) -> CheckpointInfo:
    """A record as the listing entry every checkpointer returns (no payload read)."""
    return CheckpointInfo(
        thread_id=thread_id,
        checkpoint_id=rec["id"],
        parent_id=rec.get("parent"),
        step=rec["step"],
        kind=rec["kind"],
        created_at=datetime.fromisoformat(rec["created_at"]),
        stored_bytes=int(rec.get("bytes", 0)),
        metadata=dict(rec.get("metadata", {})),
        version=int(rec.get("version", 1)),
    )
