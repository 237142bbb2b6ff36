"""Which segments a thread's records keep their history rows in, counted as the records change.

A save asks it twice: its head hint lists the segments a reader replays lists from
(``Manifest.segment_names``), and its compaction plans tier merges over the thread's delta segments
(``ops.history.tiers``). Counted once per record change, each answer costs the thread's segments, not
its records: with a scan of the records, a save's work grew with the thread (2,000 records: ~530
record visits a save).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

Record = dict[str, Any]


def held_in(rec: Record) -> tuple[str, int] | None:
    """(key, stored size) of the segment holding ``rec``'s history rows (spec.md section 4: a delta's
    ``ref``, a full record's ``rows``); None when they are inline, empty or absent."""
    held = rec["ref"] if rec["kind"] == "delta" else rec.get("rows")
    if isinstance(held, dict) and held.get("type") == "segment":
        return held["key"], int(held.get("size", 0))
    return None


class Holders:
    """Segment key -> (records holding rows in it, its stored size as the first of them records it)."""

    __slots__ = ("held",)

    def __init__(self, held: dict[str, tuple[int, int]] | None = None) -> None:
        self.held = {} if held is None else held

    @classmethod
    def of(cls, records: Iterable[Record]) -> Holders:
        out = cls()
        for rec in records:
            out.hold(rec)
        return out

    def copy(self) -> Holders:
        return Holders(dict(self.held))

    def hold(self, rec: Record) -> None:
        found = held_in(rec)
        if found is not None:
            key, size = found
            n, first = self.held.get(key, (0, size))
            self.held[key] = (n + 1, first)

    def drop(self, rec: Record) -> None:
        found = held_in(rec)
        if found is not None:
            n, size = self.held[found[0]]
            if n > 1:
                self.held[found[0]] = (n - 1, size)
            else:
                del self.held[found[0]]

    def swap(self, old: Record | None, new: Record | None) -> None:
        """``old`` (None: none) leaves, ``new`` (None: none) comes: what every change of a record is."""
        if old is not None:
            self.drop(old)
        if new is not None:
            self.hold(new)
