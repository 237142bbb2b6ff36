"""Shape checks for manifest documents, so a forged or garbled (but well-sealed) document
gives ``CorruptManifest`` instead of a KeyError deep in the reader, and can never make
the reader touch an object outside its own thread's folder."""

from __future__ import annotations

import re
from datetime import datetime, timedelta
from typing import Any

from ..errors import CorruptManifest
from . import actions as A
from . import layout

REF_TYPES = frozenset({"snapshot", "segment", "inline", "empty"})
_SHA256 = re.compile(r"[0-9a-f]{64}")


class _Bad(Exception):
    pass


def _need(cond: bool, what: str) -> None:
    if not cond:
        raise _Bad(what)


def _int(value: Any) -> bool:
    return type(value) is int or (isinstance(value, int) and not isinstance(value, bool))


def check_object_key(key: Any, thread_id: str, folder: str) -> None:
    """A payload key must name a plain object inside ``<thread dir>/<folder>/``."""
    # Runs for every record of every manifest read: messages are only formatted on failure.
    if not isinstance(key, str):
        raise _Bad("object key is not a string")
    prefix = f"{layout.thread_dir(thread_id)}/{folder}/"
    if not key.startswith(prefix):
        raise _Bad(f"object key {key!r} is outside {prefix!r}")
    name = key[len(prefix) :]
    if not name or "/" in name or "\\" in name or "\x00" in name or name in (".", ".."):
        raise _Bad(f"bad object key {key!r}")


def _ref(ref: Any, thread_id: str) -> None:
    kind = ref.get("type") if isinstance(ref, dict) else None
    if not isinstance(kind, str):
        raise _Bad("ref has no type")
    if kind not in REF_TYPES:
        raise _Bad("ref has an unknown type")
    if kind == "snapshot" or kind == "segment":
        check_object_key(ref.get("key"), thread_id, layout.SNAPSHOTS if kind == "snapshot" else layout.DELTAS)
        sha = ref.get("sha256")
        if not (isinstance(sha, str) and _SHA256.fullmatch(sha)):
            raise _Bad("ref sha256")
        size = ref.get("size")
        if not (_int(size) and size >= 0):
            raise _Bad("ref size")
        if kind == "segment":
            group = ref.get("row_group")
            if not (_int(group) and group >= 0):
                raise _Bad("ref row_group")
            if ref["key"].endswith(layout.HISTORY_SUFFIX):  # read under a snapshot's bounds: rows only
                raise _Bad("a delta ref names a history segment")
    names = ref.get("blobs", [])  # archive-wide blobs its stored object references (format.blobs)
    if not (isinstance(names, list) and all(isinstance(n, str) and layout.is_blob_name(n) for n in names)):
        raise _Bad("ref blobs")
    if "replay" in ref:  # ancestors whose history rows a load replays the snapshot's lists through
        if kind != "snapshot":
            raise _Bad("only a snapshot replays lists")
        if not (_int(ref["replay"]) and ref["replay"] >= 0):
            raise _Bad("ref replay")


ROWS_TYPES = frozenset({"segment", "inline", "empty"})


def _rows(rows: Any, thread_id: str) -> None:
    """A full record's ``rows``: where its history rows are (spec.md section 4)."""
    kind = rows.get("type") if isinstance(rows, dict) else None
    if not (isinstance(kind, str) and kind in ROWS_TYPES):
        raise _Bad("rows has no known type")
    if kind == "segment":
        check_object_key(rows.get("key"), thread_id, layout.DELTAS)
        sha, size, group = rows.get("sha256"), rows.get("size"), rows.get("row_group")
        if not (isinstance(sha, str) and _SHA256.fullmatch(sha)):
            raise _Bad("rows sha256")
        if not (_int(size) and size >= 0 and _int(group) and group >= 0):
            raise _Bad("rows size or row_group")


def _record(rec: Any, thread_id: str) -> None:
    # Runs for every record of every manifest read: plain tests, no call per check.
    if not isinstance(rec, dict):
        raise _Bad("record is not an object")
    rid, parent, kind = rec.get("id"), rec.get("parent"), rec.get("kind")
    depth: Any = rec.get("depth")
    created: Any = rec.get("created_at")
    if not (isinstance(rid, str) and rid):
        raise _Bad("record id")
    if not (parent is None or isinstance(parent, str)):
        raise _Bad("record parent")
    if not _int(rec.get("step")):
        raise _Bad("record step")
    if not (kind == "full" or kind == "delta"):
        raise _Bad("record kind")
    if not (_int(depth) and depth >= 0):
        raise _Bad("record depth")
    if kind == "delta" and parent is None:
        raise _Bad("delta without a parent")
    if not isinstance(created, str):
        raise _Bad("record created_at")
    try:
        datetime.fromisoformat(created)
    except ValueError:
        raise _Bad("record created_at is not a timestamp") from None
    if not (isinstance(rec.get("metadata", {}), dict) and isinstance(rec.get("fields", {}), dict)):
        raise _Bad("record fields")
    protection = rec.get("fields", {}).get("protection")
    if protection is not None and not (  # its binding only: the record's digests (or MACs) prove the content
        isinstance(protection, dict)
        and protection.keys() == {"binding_sha256"}
        and (protection["binding_sha256"] is None or isinstance(protection["binding_sha256"], str))
    ):
        raise _Bad("record protection")
    if not (_int(rec.get("bytes", 0)) and _int(rec.get("version", 1))):
        raise _Bad("record sizes")
    # every record proves its content: a plaintext one by its two digests, an encrypted one by its two
    # MACs and no plain digest (which would let anyone confirm a guess of the content)
    enc = rec.get("enc")
    for name in ("state_sha256", "messages_sha256"):
        sha = rec.get(name)
        if not (isinstance(sha, str) and _SHA256.fullmatch(sha) if enc is None else sha is None):
            raise _Bad(f"record {name}")
    if enc is not None:
        if not (isinstance(enc, dict) and isinstance(enc.get("key_id"), str)):
            raise _Bad("record enc")
        if not (isinstance(rec.get("state_mac"), str) and isinstance(rec.get("messages_mac"), str)):
            raise _Bad("encrypted record without its state_mac and messages_mac")
    _ref(rec.get("ref"), thread_id)
    if kind == "full" and rec["ref"]["type"] != "snapshot":
        raise _Bad("full record without a snapshot")
    if "rows" in rec:  # a full record's history rows (a delta's are its ops); verify reports one without
        if kind != "full":
            raise _Bad("a delta record with rows (its ops are its history rows)")
        _rows(rec["rows"], thread_id)


def check_record(rec: Any, thread_id: str, key: str | None = None) -> None:
    try:
        _record(rec, thread_id)
    except _Bad as exc:
        rid = rec.get("id") if isinstance(rec, dict) and isinstance(rec.get("id"), str) else None
        raise CorruptManifest(f"malformed record: {exc}", thread_id=thread_id, checkpoint_id=rid, key=key) from None


def check_commit(doc: dict[str, Any], thread_id: str, key: str | None = None) -> None:
    """The ``add`` and ``compact`` actions of a commit entry (other actions are checked where applied)."""
    try:
        actions = doc.get("actions")
        _need(isinstance(actions, list), "actions is not a list")
        assert isinstance(actions, list)
        for action in actions:
            _need(isinstance(action, dict), "action is not an object")
            _need(isinstance(action.get("action"), str), "action has no name")
            if action.get("action") == A.ADD:
                _record(action.get("record"), thread_id)
                _need(isinstance(action.get("ops", []), list), "ops is not a list")
            elif action.get("action") == A.COMPACT:
                check_object_key(action.get("key"), thread_id, layout.DELTAS)
                _need(isinstance(action.get("sha256"), str) and _int(action.get("size")), "compact digest")
                groups = action.get("row_groups")
                _need(isinstance(groups, dict), "row_groups")
                for group in groups.values():
                    _need(isinstance(group, dict) and _int(group.get("row_group")), "row group")
                    _need(_int(group.get("bytes", 0)), "row group bytes")
                _need(isinstance(action.get("empty", []), list), "empty")
            else:
                _maintenance(action, thread_id)
    except _Bad as exc:
        raise CorruptManifest(f"malformed commit entry: {exc}", thread_id=thread_id, key=key) from None


def _strs(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(v, str) for v in value)


def _tombstoned(key: Any, entry: Any, thread_id: str) -> None:
    """What a tombstone may name: a payload object of its own thread, or a blob (which gc never deletes
    for one thread: only when no thread references it). Never the log, the parts, the hint or another
    thread's objects: gc deletes what a tombstone names."""
    if isinstance(key, str) and layout.is_blob_key(key):
        # the time the thread stopped referencing it: gc keeps the blob for the grace after (ops.gc)
        _need(layout.blob_of(key) is not None, f"tombstone names {key!r}, which is no blob")
    else:
        folder = key.removeprefix(layout.thread_dir(thread_id) + "/").partition("/")[0] if isinstance(key, str) else ""
        _need(folder in layout.PAYLOAD_FOLDERS, f"tombstone names {key!r}, which is no payload object of the thread")
        check_object_key(key, thread_id, folder)
    at = entry.get("at") if isinstance(entry, dict) else None
    _need(_aware(at) and _int(entry.get("size")), "tombstone time or size")


def _aware(value: Any) -> bool:
    """An ISO-8601 time with its offset (gc compares it with an aware cutoff)."""
    try:
        return isinstance(value, str) and datetime.fromisoformat(value).tzinfo is not None
    except ValueError:
        return False


def _maintenance(action: dict[str, Any], thread_id: str) -> None:
    kind = action.get("action")
    if kind == A.REMOVE:
        _need(_strs(action.get("ids")), "remove ids")
    elif kind == A.UPDATE:
        _need(isinstance(action.get("id"), str) and isinstance(action.get("set"), dict), "update action")
        if "ref" in action["set"]:
            _ref(action["set"]["ref"], thread_id)
        if "rows" in action["set"]:
            _rows(action["set"]["rows"], thread_id)
    elif kind == A.TOMBSTONE:
        objects = action.get("objects")
        _need(isinstance(objects, dict), "tombstone action")
        assert isinstance(objects, dict)
        for key, size in objects.items():
            _tombstoned(key, {"at": action.get("at"), "size": size}, thread_id)
    elif kind == A.PURGE:
        _need(_strs(action.get("keys")), "purge keys")


def check_folded(doc: dict[str, Any], thread_id: str, key: str | None = None) -> None:
    records = doc.get("records")
    inline = doc.get("inline", {})
    if not isinstance(records, list) or not isinstance(inline, dict) or not _int(doc.get("seq")):
        raise CorruptManifest("malformed folded manifest", thread_id=thread_id, key=key)
    if not all(isinstance(ops, list) for ops in inline.values()):
        raise CorruptManifest("malformed folded manifest: inline ops", thread_id=thread_id, key=key)
    tombstones = doc.get("tombstones", {})
    try:
        _need(isinstance(tombstones, dict), "tombstones")
        for name, entry in tombstones.items():
            _tombstoned(name, entry, thread_id)
    except _Bad as exc:
        raise CorruptManifest(f"malformed folded manifest: {exc}", thread_id=thread_id, key=key) from None
    for rec in records:
        check_record(rec, thread_id, key)


MAX_HINT_SEGMENTS = 65_536
"""Segment names a head hint may list (a reader fetches them all: one thread's segments)."""


def check_hint(doc: dict[str, Any], thread_id: str) -> None:
    """A head hint is only used when every field has the right shape."""
    chain = doc.get("chain", [])
    manifest_seq = doc.get("manifest_seq")
    if not _int(doc.get("seq")) or not (manifest_seq is None or _int(manifest_seq)) or not isinstance(chain, list):
        raise CorruptManifest("malformed head hint", thread_id=thread_id)
    entry = doc.get("entry_sha256")  # the hint may go out before its commit lands: readers check it
    if not (isinstance(entry, str) and _SHA256.fullmatch(entry)):
        raise CorruptManifest("malformed head hint: entry_sha256", thread_id=thread_id)
    for rec in chain:
        check_record({k: v for k, v in rec.items() if k != "ops"} if isinstance(rec, dict) else rec, thread_id)
        if not isinstance(rec.get("ops", []), list):
            raise CorruptManifest("malformed head hint: ops", thread_id=thread_id)
    segments = doc.get("segments", [])  # names in the thread's deltas/: the head snapshot's lineage rows
    if not isinstance(segments, list) or len(segments) > MAX_HINT_SEGMENTS:
        raise CorruptManifest("malformed head hint: segments", thread_id=thread_id)
    folder = layout.segments_dir(layout.thread_dir(thread_id))
    try:
        for name in segments:
            check_object_key(f"{folder}/{name}" if isinstance(name, str) else name, thread_id, layout.DELTAS)
    except _Bad:
        raise CorruptManifest("malformed head hint: segments", thread_id=thread_id) from None
    appends = doc.get("appends")  # the commits after its fold, each one add of the chain's last records
    if appends is not None and not (
        _int(appends) and 1 < appends <= len(chain) and appends == doc["seq"] - (manifest_seq or 0)
    ):
        raise CorruptManifest("malformed head hint: appends", thread_id=thread_id)


MAX_GC_GRACE_MS = 10 * 365 * 86_400_000
"""The longest grace an archive marker may record (ten years): a longer one is no setting anyone made."""


def marker_grace(grace: timedelta) -> int:
    """The ``gc_grace_ms`` an archive marker records for ``grace`` (whole milliseconds)."""
    return round(grace / timedelta(milliseconds=1))


def check_marker(doc: dict[str, Any], key: str | None = None) -> timedelta:
    """The grace an archive marker records (``gc_grace_ms``), every process's: a marker without a
    valid one is ``CorruptManifest``, never a KeyError or a grace nobody set."""
    ms = doc.get("gc_grace_ms")
    if doc.get("type") != "archive" or not isinstance(ms, int) or not _int(ms) or not 0 <= ms <= MAX_GC_GRACE_MS:
        raise CorruptManifest(
            f"malformed archive marker: gc_grace_ms must be a whole number of milliseconds from 0 to "
            f"{MAX_GC_GRACE_MS} (got {str(ms)[:40]!r}); restore the marker from a copy of the archive",
            key=key,
        )
    return timedelta(milliseconds=ms)
