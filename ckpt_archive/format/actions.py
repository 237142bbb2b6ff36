"""The actions of a commit entry (spec.md sections 6 and 10): one typed constructor per action, and the
one list of action names that writers build from and the fold (``manifest.Manifest.apply_entry``)
checks an entry against.

Pure, no I/O. Every commit a writer makes is a list of these, built here and nowhere else, so the
shape of what is written is in one module the spec can be read against: ``add`` and ``compact``
(a save), ``remove``, ``update`` (as a re-base, an edit or a pin), ``tombstone`` and ``purge``
(maintenance and gc). Each returns exactly the dict stored in the entry's ``actions``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Final, Literal, NotRequired, TypedDict

from ..delta import Delta

ADD: Final = "add"
COMPACT: Final = "compact"
REMOVE: Final = "remove"
UPDATE: Final = "update"
TOMBSTONE: Final = "tombstone"
PURGE: Final = "purge"
ACTIONS: Final = (ADD, COMPACT, REMOVE, UPDATE, TOMBSTONE, PURGE)
"""Every action the format has, in the order the spec lists them: a reader refuses any other name
(``UnsupportedFormatVersion``: an entry of a format it does not know)."""
MAINTENANCE: Final = frozenset({REMOVE, UPDATE, TOMBSTONE, PURGE})
"""The actions of maintenance commits (spec.md section 10), on top of a save's ``add`` and ``compact``."""

UPDATABLE: Final = frozenset(
    {"kind", "depth", "ref", "rows", "bytes", "version", "metadata", "fields"}
    | {"state_sha256", "messages_sha256", "state_mac", "messages_mac", "enc"}
)
"""The record fields an ``update`` may set (spec.md section 10); a reader ignores any other."""

Record = dict[str, Any]


class AddAction(TypedDict):
    action: Literal["add"]
    record: Record
    ops: NotRequired[Delta]


class RowGroup(TypedDict):
    row_group: int
    bytes: int


class CompactAction(TypedDict):
    action: Literal["compact"]
    key: str
    sha256: str
    size: int
    row_groups: dict[str, RowGroup]
    empty: list[str]


class RemoveAction(TypedDict):
    action: Literal["remove"]
    ids: list[str]


class UpdateAction(TypedDict):
    action: Literal["update"]
    id: str
    set: dict[str, Any]


class TombstoneAction(TypedDict):
    action: Literal["tombstone"]
    at: str
    objects: dict[str, int]


class PurgeAction(TypedDict):
    action: Literal["purge"]
    keys: list[str]


Action = AddAction | CompactAction | RemoveAction | UpdateAction | TombstoneAction | PurgeAction
"""One action of a commit entry, as a writer builds it (a reader gets them as parsed JSON)."""


def add(record: Record, ops: Delta | None = None) -> AddAction:
    """Append ``record`` (it becomes the head). ``ops`` is present iff the record's ref is ``inline``
    (its delta lives in the entry; none given: no operations) or, for a full record, its ``rows`` are
    (its history rows live in the entry, spec.md section 4), so any other ``add`` never carries any."""
    rows = record.get("rows")
    if record["ref"]["type"] == "inline" or (isinstance(rows, dict) and rows.get("type") == "inline"):
        return {"action": ADD, "record": record, "ops": [] if ops is None else ops}
    if ops is not None:
        raise ValueError(f"an add of a {record['ref']['type']!r} record without inline rows carries no ops")
    return {"action": ADD, "record": record}


def compact(
    key: str, sha256: str, size: int, row_groups: Mapping[str, tuple[int, int]], empty: list[str]
) -> CompactAction:
    """The inline deltas of ``row_groups`` (checkpoint id -> (row group, bytes), as ``encode_segment``
    placed them) now live in segment ``key`` (its ``sha256`` and ``size``); those of ``empty`` had no
    operations and hold none."""
    groups: dict[str, RowGroup] = {cid: {"row_group": g, "bytes": b} for cid, (g, b) in row_groups.items()}
    return {"action": COMPACT, "key": key, "sha256": sha256, "size": size, "row_groups": groups, "empty": empty}


def remove(ids: list[str]) -> RemoveAction:
    """The records ``ids`` leave the manifest (with their inline ops)."""
    return {"action": REMOVE, "ids": ids}


def update(checkpoint_id: str, changes: dict[str, Any]) -> UpdateAction:
    """Replace fields of a record; only ``UPDATABLE`` ones (a reader ignores others, so writing one is a
    writer's bug). ``rebase``, ``edit`` and ``pin`` are the shapes the code writes."""
    unknown = set(changes) - UPDATABLE
    if unknown:
        raise ValueError(f"an update cannot set {sorted(unknown)}")
    return {"action": UPDATE, "id": checkpoint_id, "set": changes}


def snapshot_fields(ref: dict[str, Any], size: int, digests: Mapping[str, Any]) -> dict[str, Any]:
    """The fields of a record given a full snapshot of its own after the fact (``ref``, ``size``
    bytes written), with the content's digests (or, encrypted, its key id and MACs) so it stays provable."""
    return {"kind": "full", "depth": 0, "ref": ref, "bytes": size, **digests}


def _snapshot(changes: Mapping[str, Any]) -> None:
    if changes.get("kind") != "full" or changes.get("depth") != 0 or "ref" not in changes or "bytes" not in changes:
        raise ValueError("a re-base or an edit sets a full snapshot: kind, depth, ref and bytes (snapshot_fields)")


def rebase(checkpoint_id: str, changes: dict[str, Any]) -> UpdateAction:
    """A re-base: the record gets a full snapshot of the same state (``snapshot_fields``), so no chain
    passes through a removed or edited parent."""
    _snapshot(changes)
    return update(checkpoint_id, changes)


def edit(checkpoint_id: str, changes: dict[str, Any], version: int) -> UpdateAction:
    """An edit (``update_state``): a full snapshot of the new state (``snapshot_fields``) at ``version``
    (the old one + 1)."""
    _snapshot(changes)
    return update(checkpoint_id, {**changes, "version": version})


def rows(checkpoint_id: str, where: dict[str, Any]) -> UpdateAction:
    """A full record's history rows are now ``where`` (a segment ref or ``{"type": "empty"}``): they
    were replaced (a new chain root, an edit) or their segment was written again (spec.md section 10)."""
    if where.get("type") not in ("segment", "empty"):
        raise ValueError("a maintenance commit places history rows in a segment, or none")
    return update(checkpoint_id, {"rows": where})


def repoint(checkpoint_id: str, ref: dict[str, Any], size: int) -> UpdateAction:
    """A delta's ops are now in segment ``ref`` (``size``: its share of the row group): their segment
    was written again without rows of records that left or changed (spec.md section 10)."""
    if ref.get("type") != "segment":
        raise ValueError("a delta is re-pointed to a segment")
    return update(checkpoint_id, {"ref": ref, "bytes": size})


def pin(checkpoint_id: str, metadata: dict[str, Any]) -> UpdateAction:
    """A pin or an unpin: the record's whole new ``metadata`` (the state and its version untouched)."""
    return update(checkpoint_id, {"metadata": metadata})


def tombstone(objects: dict[str, int], at: str) -> TombstoneAction:
    """``objects`` (key -> size) no remaining record references, unreferenced since ``at`` (ISO-8601 UTC)."""
    return {"action": TOMBSTONE, "at": at, "objects": objects}


def purge(keys: Iterable[str]) -> PurgeAction:
    """gc deleted these tombstoned objects (or found them in use again): the tombstones are dropped."""
    return {"action": PURGE, "keys": list(keys)}
