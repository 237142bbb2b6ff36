"""A checkpoint's content (state and messages), and the cache key of a record's content.

A snapshot object stores a content with its long lists replayed from history rows
(``format.replay``); the engine's one snapshot encode is ``engine.contents.Contents.snapshot``.
"""

from __future__ import annotations

from typing import Any

Content = tuple[dict[str, Any], list[Any]]
"""A checkpoint's content: (state, messages)."""


Path = tuple[str, ...]
"""A part of a state: a top-level key, or a key within one (``("channels", "messages")``): what the
engine's part cache keeps of a content (``engine.contents.Contents.part``)."""


def state_key(rec: dict[str, Any]) -> str:
    """Cache key of a record's content: its id, its version (an edit bumps it, so a stale state is never
    reused) and the digests it was checked against (a record of a head hint whose commit never landed
    names the content its writer meant, which may not be what the same id holds once committed)."""
    state = rec.get("state_sha256") or rec.get("state_mac") or ""
    messages = rec.get("messages_sha256") or rec.get("messages_mac") or ""
    return f"{rec['id']}@{rec.get('version', 1)}:{state[:16]}:{messages[:16]}"
