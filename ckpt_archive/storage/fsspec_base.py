"""What every store over an fsspec filesystem shares: the filesystem, and turning its listings
(absolute paths, a leading '/' or not, each backend's own mtime field) into keys under the root."""

from __future__ import annotations

import contextlib
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any

import fsspec

from .base import Listing, ObjectKind, ObjectStore
from .retry import Retry


def protocols(fs: fsspec.AbstractFileSystem) -> set[str]:
    proto = fs.protocol
    return {proto} if isinstance(proto, str) else set(proto)


class FsspecStore(ObjectStore):
    """A store whose objects are files of ``fs`` under ``root``."""

    def __init__(
        self,
        fs: fsspec.AbstractFileSystem,
        root: str,
        *,
        retry: Retry | None = None,
        object_kind: ObjectKind | None = None,
    ) -> None:
        super().__init__(root, retry=retry, object_kind=object_kind)
        self._fs = fs

    @property
    def fs(self) -> fsspec.AbstractFileSystem:
        return self._fs

    def _names(self, path: str, entries: Iterable[str]) -> list[str]:
        """The names directly under ``path`` among a listing's entries. Compared without a leading
        '/': memory:// lists '/root/x' as 'root/x'."""
        base = path.strip("/") + "/"
        names = set()
        for entry in entries:
            e = entry.strip("/")
            name = e[len(base) :] if e.startswith(base) else e.rsplit("/", 1)[-1]
            if name and "/" not in name:
                names.add(name)
        return sorted(names)

    def _listing(self, found: dict[str, dict[str, Any]]) -> Listing:
        out: Listing = {}
        root = self.root.lstrip("/") + "/"
        for p, info in found.items():
            rel = p.lstrip("/")
            rel = rel[len(root) :] if rel.startswith(root) else rel
            out[rel] = {"size": int(info.get("size") or 0), "mtime": _mtime(info)}
        return out


def _mtime(info: dict[str, Any]) -> datetime | None:
    """The modification time, whichever field and type the backend reports it in."""
    for field in ("LastModified", "mtime", "updated", "last_modified", "created"):
        value = info.get(field)
        if value is None:
            continue
        if isinstance(value, datetime):
            return value if value.tzinfo else value.replace(tzinfo=UTC)
        if isinstance(value, int | float):
            return datetime.fromtimestamp(value, UTC)
        if isinstance(value, str):
            with contextlib.suppress(ValueError):
                parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
                return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)
    return None
