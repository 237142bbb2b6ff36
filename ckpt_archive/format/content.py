"""A checkpoint's content (state and messages) as one paged snapshot object.

Every plaintext snapshot (a save's, a re-based or edited one, a fork's) is encoded by
``paged_snapshot``, through the engine's one snapshot encode (``Contents.snapshot``), so the message
list is paged exactly like long state lists and a page both share is written once.
"""

from __future__ import annotations

from typing import Any

from ..delta import MESSAGES
from . import layout, pages
from .objects import encode_snapshot

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


def paged_snapshot(
    thread_id: str, checkpoint_id: str, content: Content, known: dict[str, dict[str, Any]]
) -> tuple[bytes, list[tuple[str, bytes]], list[dict[str, Any]]]:
    """(snapshot bytes, new page objects to write, refs of every page it names).

    ``known`` maps page digests to refs of pages already stored (reused, not rewritten).
    """
    state, messages = content
    known = dict(known)

    def page_key(digest: str) -> str:
        return layout.page_key(thread_id, digest)

    tails, table, new_pages, refs = pages.split(state, page_key, known)
    known.update((r["digest"], r) for r in refs)
    message_tails, message_table, new_message_pages, message_refs = pages.split({MESSAGES: messages}, page_key, known)
    seen = {r["digest"] for r in refs}
    refs = refs + [r for r in message_refs if r["digest"] not in seen]
    data = encode_snapshot(thread_id, checkpoint_id, tails, table, message_tails[MESSAGES], message_table)
    return data, new_pages + new_message_pages, refs
