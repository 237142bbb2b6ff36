"""Long lists in snapshots are stored as shared, content-addressed pages.

A chat history of n messages would otherwise be copied into every snapshot,
so snapshots alone would grow as n^2 / interval. Instead each list of at least
``PAGE_ITEMS`` items (at any path of nested objects) is cut at fixed, aligned
indexes into pages (see ``page_bounds``); the full pages are stored once per thread
under a key derived from their content, and the snapshot keeps only the tail.
A list that grew by appending keeps its old pages, so each message is stored
once however many snapshots include it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any

from .. import codec, limits, versions
from ..errors import DigestMismatch, IntegrityError, ObjectTooLarge, TruncatedObject, UnsupportedFormatVersion

PAGE_ITEMS = 32
LEVELS = (2048, 256, PAGE_ITEMS)
Ref = dict[str, Any]


def page_bounds(n: int) -> list[tuple[int, int]]:
    """Page ranges of a list of n items: the largest aligned pages first (2048, then 256, then 32 items).

    Big pages keep the number of objects a load fetches small (a 1,000-item list: 3 + 7 pages); each
    item is stored in at most one page per level over the life of a thread.
    """
    out, start = [], 0
    for size in LEVELS:
        while start + size <= n:
            out.append((start, start + size))
            start += size
    return out


def _lists(state: dict[str, Any], path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], list[Any]]]:
    for key, value in state.items():
        if type(value) is list and len(value) >= PAGE_ITEMS:
            yield (*path, key), value
        elif type(value) is dict:
            yield from _lists(value, (*path, key))


def split(
    state: dict[str, Any], page_key: Callable[[str], str], known: dict[str, Ref]
) -> tuple[dict[str, Any], dict[str, list[str]], list[tuple[str, bytes]], list[Ref]]:
    """(state with long lists cut to their tail, {path json: [page digests]}, new page objects, all refs).

    ``known`` maps a page digest to the ref of a page object already stored.
    """
    layout: dict[str, list[str]] = {}
    writes: list[tuple[str, bytes]] = []
    refs: dict[str, Ref] = {}
    tails: dict[tuple[str, ...], list[Any]] = {}
    for path, items in _lists(state):
        digests = []
        bounds = page_bounds(len(items))
        full = bounds[-1][1] if bounds else 0
        for start, end in bounds:
            doc = _envelope(codec.dumps(items[start:end]))
            digest = codec.sha256(doc)
            digests.append(digest)
            if digest in refs:
                continue
            ref = known.get(digest)
            if ref is None:
                ref = {"digest": digest, "key": page_key(digest)}
                writes.append((ref["key"], codec.compress(doc)))
            refs[digest] = ref
        layout[codec.dumps(list(path)).decode()] = digests
        tails[path] = items[full:]
    if not tails:
        return state, {}, [], []
    out = _replace(state, tails)
    return out, layout, writes, list(refs.values())


def _replace(state: dict[str, Any], tails: dict[tuple[str, ...], list[Any]], path: tuple[str, ...] = ()) -> Any:
    out = dict(state)
    for key, value in state.items():
        sub = (*path, key)
        if sub in tails:
            out[key] = tails[sub]
        elif type(value) is dict and any(p[: len(sub)] == sub for p in tails):
            out[key] = _replace(value, tails, sub)
    return out


def _envelope(items_json: bytes) -> bytes:
    """The canonical page document; its sha256 (of the uncompressed bytes) names the page."""
    return b'{"format_version":%d,"items":%b,"type":"page"}' % (versions.FORMAT_VERSION, items_json)


_ENVELOPE = len(_envelope(b""))


def decode_page(data: bytes, ref: Ref, *, thread_id: str, checkpoint_id: str) -> tuple[list[Any], int]:
    """(the page's items, the bytes of their JSON: what they add to the state they are joined into)."""
    key = ref["key"]
    where = {"thread_id": thread_id, "checkpoint_id": checkpoint_id, "key": key}
    try:
        raw = codec.decompress(data, what=f"page {key!r}", kind="page")
    except IntegrityError as exc:
        raise type(exc)(str(exc), **where) from None
    if codec.sha256(raw) != ref["digest"]:
        raise DigestMismatch("page content differs from its digest", **where)
    try:
        doc = codec.decode_document(raw, f"page {key!r}")
    except UnsupportedFormatVersion:
        raise
    except IntegrityError as exc:
        raise TruncatedObject(str(exc), **where) from None
    items = doc.get("items")
    if doc.get("type") != "page" or type(items) is not list:
        raise TruncatedObject("page object has no items", **where)
    return items, max(0, len(raw) - _ENVELOPE)


def check_joined(
    tables: Iterable[dict[str, list[str]]],
    pages: dict[str, tuple[list[Any], int]],
    *,
    thread_id: str,
    checkpoint_id: str,
) -> None:
    """Refuse (``ObjectTooLarge``) page tables that would join into more than a state holds.

    A table may name one page many times (a list of repeated items does), and each naming copies the
    page's items into the list: a small snapshot naming one page a million times would build lists
    of billions of items. A writer's tables join into its state, so into at most ``STATE_BYTES`` of
    JSON and ``STATE_VALUES`` items; this is checked on the tables before anything is joined."""
    items = size = 0
    for table in tables:
        for digests in table.values():
            for digest in digests:
                page = pages[digest]
                items += len(page[0])
                size += page[1]
    if items > limits.STATE_VALUES or size > limits.STATE_BYTES:
        raise ObjectTooLarge(
            f"snapshot's page tables join into {items} items, {size} bytes of JSON, more than a state holds "
            f"({limits.STATE_VALUES} values, {limits.STATE_BYTES} bytes): refused (a forged or damaged "
            "snapshot; delete or restore it)",
            thread_id=thread_id,
            checkpoint_id=checkpoint_id,
        )


def join(
    state: dict[str, Any], layout: dict[str, list[str]], pages: dict[str, tuple[list[Any], int]]
) -> dict[str, Any]:
    """Inverse of ``split``: put every page (``decode_page``) back in front of its list's tail
    (``check_joined`` first)."""
    for path_json, digests in layout.items():
        path = codec.loads(path_json)
        parent = state
        for key in path[:-1]:
            parent = parent[key]
        items: list[Any] = []
        for digest in digests:
            items.extend(pages[digest][0])
        parent[path[-1]] = items + parent[path[-1]]
    return state
