"""The on-storage format versions, in one place: what this revision writes and what its readers accept.

Every document, Parquet file and session log carries ``format_version``; readers refuse any other
(``UnsupportedFormatVersion``) rather than guess. ``MIGRATIONS`` is the history: its index is the
version (as langgraph-checkpoint-postgres's ``MIGRATIONS``). Today there is one version and no reader
calls an ``upgrade``; the first change after a release appends an entry whose ``upgrade`` turns a
document of the version before into this one and adds that version to ``READABLE``, so old documents
are read through one function per version and no branch elsewhere. Pure: no imports of the package,
so every layer (codec included) may read it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Migration:
    """What version ``MIGRATIONS.index(self)`` changed, and how a document of the version before becomes
    one of it (None: there is no version before, or its documents cannot be read any more)."""

    summary: str
    upgrade: Callable[[dict[str, Any]], dict[str, Any]] | None = None


MIGRATIONS: list[Migration] = [
    Migration("no format (an index, not a version: the list starts at version 1)"),
    Migration("the format of docs/format/spec.md"),
]

FORMAT_VERSION = len(MIGRATIONS) - 1
"""The version every document this revision writes carries."""

READABLE: tuple[int, ...] = (FORMAT_VERSION,)
"""The versions a reader accepts (``codec.check_format``, ``manifest.unseal``, the archive marker, the
Parquet metadata of segments and session logs): today only the current one."""


def readable(version: object) -> bool:
    """Whether ``version`` (an int in JSON, its decimal text in Parquet metadata) is one a reader accepts."""
    return any(version == v or version == str(v) for v in READABLE) and type(version) is not bool
