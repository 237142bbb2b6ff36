"""Turning an fsspec filesystem's listings into keys under a store's root: functions every fsspec
backend calls (absolute paths with a leading '/' or not, each backend's own mtime field)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any

from .base import Listing


def names(path: str, entries: Iterable[str]) -> list[str]:
    """The names directly under ``path`` among a listing's entries, sorted. Compared without a leading
    '/': memory:// lists '/root/x' as 'root/x'."""
    base = path.strip("/") + "/"
    out = set()
    for entry in entries:
        e = entry.strip("/")
        name = e[len(base) :] if e.startswith(base) else e.rsplit("/", 1)[-1]
        if name and "/" not in name:
            out.add(name)
    return sorted(out)


def listing(root: str, found: dict[str, dict[str, Any]]) -> Listing:
    """A detailed ``find``'s answer as keys relative to ``root``, with size and a UTC mtime."""
    out: Listing = {}
    base = root.lstrip("/") + "/"
    for p, info in found.items():
        rel = p.lstrip("/")
        rel = rel[len(base) :] if rel.startswith(base) else rel
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
