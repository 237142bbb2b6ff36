"""The references a record holds (spec.md section 5): where its content (``ref``) and its history rows
(``rows``) are stored. One constructor per kind, built here and nowhere else, as ``actions`` does for
the actions of a commit entry: what ``ops/`` and the engine write is read against one module.

Pure, no I/O. ``schema.check_record`` is the reader's side of the same shapes.
"""

from __future__ import annotations

from typing import Any, Final

from .. import codec

SNAPSHOT: Final = "snapshot"
"""``ref`` only: the content is a snapshot object (its long lists replayed: ``replay``)."""
SEGMENT: Final = "segment"
"""A row group of a delta segment holds the ops (``ref`` of a delta) or the history rows (``rows``)."""
INLINE: Final = "inline"
"""The ops ride in the commit entry's ``add`` (or the manifest's fold, once folded)."""
EMPTY: Final = "empty"
"""No ops at all: the content is its base's."""

Ref = dict[str, Any]


def snapshot(key: str, data: bytes) -> Ref:
    """A snapshot object as stored (sealed, when encrypted): its key, digest and size."""
    return {"type": SNAPSHOT, "key": key, "sha256": codec.sha256(data), "size": len(data)}


def segment(key: str, data: bytes, row_group: int) -> Ref:
    """Row group ``row_group`` of the segment ``data`` stored at ``key``."""
    return {"type": SEGMENT, "key": key, "sha256": codec.sha256(data), "size": len(data), "row_group": row_group}


def inline(blob_names: list[str] | None = None) -> Ref:
    """Ops inline in the entry; ``blob_names``: the blobs their values reference (gc keeps them)."""
    return {"type": INLINE, "blobs": blob_names} if blob_names else {"type": INLINE}


def empty() -> Ref:
    return {"type": EMPTY}


def kind(ref: Ref | None) -> str | None:
    """The kind of a reference (None for a record without one, e.g. a full record with no ``rows``)."""
    return None if ref is None else ref.get("type")
