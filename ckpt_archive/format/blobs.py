"""Large string values stored once, by content: the one encoding of a stored JSON value.

An agent re-sends the same screenshot or file (base64 text) in many turns, and a copied thread holds
it again; stored inline, every snapshot, page and delta that holds it would store it once more. So a
string of at least ``limits.BLOB_MIN_BYTES`` of UTF-8 is stored as one archive-wide object
``_blobs/<name>.zst`` (``layout.blob_key``), shared by every checkpoint and thread that holds it, and the
stored JSON holds a **reference** in its place::

    {"$blob": {"key": "_blobs/<name>.zst", "sha256": <name>, "size": <UTF-8 bytes>}}

(encrypted: ``"hmac"`` instead of ``"sha256"`` and a ``.enc`` key, spec.md section 15). A user object
that looks like a reference -- exactly one key, ``"$blob"`` or ``"$esc"`` -- is stored as
``{"$esc": <that object, its values encoded>}``, so every JSON value round-trips exactly.

``encode`` is the one way a value is stored (snapshot contents, and delta op
values); ``decode`` is its inverse, given the blobs' text. Pure: no I/O, the engine fetches.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from .. import codec, limits
from ..errors import DigestMismatch, IntegrityError, TruncatedObject
from . import layout

REF = "$blob"
ESCAPE = "$esc"
_MARKS = (REF, ESCAPE)
_MIN_CHARS = (limits.BLOB_MIN_BYTES + 3) // 4
"""A string of fewer characters has fewer than ``BLOB_MIN_BYTES`` of UTF-8 (at most 4 bytes each): no
UTF-8 encode is needed to rule it out."""

_WALKED = (str, list, dict)
Namer = Callable[[bytes], str]
"""The name of a blob's UTF-8 bytes: their sha256 (plaintext) or a keyed digest (encrypted)."""


def _looks_like_mark(value: dict[str, Any]) -> bool:
    return len(value) == 1 and next(iter(value)) in _MARKS


def encode(value: Any, name: Namer, *, sealed: bool = False, references: bool = True) -> tuple[Any, dict[str, bytes]]:
    """(``value`` as stored, {blob name: UTF-8 bytes} of every blob it references).

    Unchanged parts are returned as they are (the same objects): a value with no large string and no
    look-alike is returned itself, and only the containers on the way to a replaced string are new.
    ``sealed``: the names are keyed digests of an encrypted archive (``.enc`` keys, ``"hmac"`` field).
    ``references=False``: every string stays inline and only look-alikes are escaped (a value whose
    holder cannot list its blobs: a LangGraph write object with too many, spec.md section 11); it
    decodes like any other.
    """
    found: dict[str, bytes] = {}
    field = "hmac" if sealed else "sha256"

    def walk(v: Any) -> Any:
        t = type(v)
        if t is str:
            if not references or len(v) < _MIN_CHARS:
                return v
            raw = v.encode()
            if len(raw) < limits.BLOB_MIN_BYTES:
                return v
            digest = name(raw)
            found[digest] = raw
            return {REF: {"key": layout.blob_key(digest, sealed=sealed), field: digest, "size": len(raw)}}
        if t is list:
            out: list[Any] | None = None
            for i, x in enumerate(v):
                y = walk(x) if type(x) in _WALKED else x
                if y is not x and out is None:
                    out = v[:i]
                if out is not None:
                    out.append(y)
            return v if out is None else out
        if t is dict:
            items: dict[str, Any] | None = None
            for k, x in v.items():
                y = walk(x) if type(x) in _WALKED else x
                if y is not x and items is None:
                    items = dict(v)
                if items is not None:
                    items[k] = y
            if _looks_like_mark(v):
                return {ESCAPE: v if items is None else items}
            return v if items is None else items
        return v

    return walk(value), found


def _ref(mark: Any, sealed: bool) -> tuple[str, int]:
    """(name, size) of a reference's body, refused unless it is exactly what ``encode`` writes."""
    field = "hmac" if sealed else "sha256"
    if type(mark) is dict and mark.keys() == {"key", field, "size"}:
        digest, size = mark[field], mark["size"]
        if (
            type(digest) is str
            and layout.is_blob_name(digest)
            and mark["key"] == layout.blob_key(digest, sealed=sealed)
            and type(size) is int
            and limits.BLOB_MIN_BYTES <= size <= limits.LIMITS["blob"]
        ):
            return digest, size
    raise TruncatedObject(f"malformed blob reference {codec.dumps(mark)[:200].decode(errors='replace')!r}")


def names(value: Any, *, sealed: bool = False) -> dict[str, int]:
    """{name: size} of every blob a stored value references (a malformed reference: ``TruncatedObject``)."""
    out: dict[str, int] = {}

    def walk(v: Any) -> None:
        t = type(v)
        if t is dict:
            if len(v) == 1:
                k, x = next(iter(v.items()))
                if k == REF:
                    digest, size = _ref(x, sealed)
                    out[digest] = size
                    return
                if k == ESCAPE:
                    if type(x) is not dict:
                        raise TruncatedObject("malformed escaped object in a stored value")
                    v = x
            for x in v.values():
                if type(x) is dict or type(x) is list:
                    walk(x)
        elif t is list:
            for x in v:
                if type(x) is dict or type(x) is list:
                    walk(x)

    walk(value)
    return out


def marked(value: Any) -> bool:
    """Does a stored value hold a reference or an escape (so ``decode`` has something to undo)?"""
    t = type(value)
    if t is dict:
        if len(value) == 1 and next(iter(value)) in _MARKS:
            return True
        values = value.values()
    elif t is list:
        values = value
    else:
        return False
    for x in values:
        tx = type(x)
        if (tx is dict or tx is list) and marked(x):
            return True
    return False


def decode(value: Any, texts: Mapping[str, str], *, sealed: bool = False) -> Any:
    """The value ``encode`` stored as ``value``, given the text of every blob it references (by
    name, from ``names``). A value with nothing to undo is returned itself."""
    if not marked(value):
        return value

    def walk(v: Any) -> Any:
        t = type(v)
        if t is dict:
            if len(v) == 1:
                k, x = next(iter(v.items()))
                if k == REF:
                    return texts[_ref(x, sealed)[0]]
                if k == ESCAPE:
                    if type(x) is not dict:
                        raise TruncatedObject("malformed escaped object in a stored value")
                    return {kk: walk(xx) for kk, xx in x.items()}
            return {k: walk(x) for k, x in v.items()}
        if t is list:
            return [walk(x) for x in v]
        return v

    return walk(value)


def pack(raw: bytes) -> bytes:
    """A plaintext blob object: one zstd frame of the string's UTF-8 bytes (base64 shrinks ~25%)."""
    return codec.compress(raw)


def unpack(data: bytes, name: str, size: int, *, check: Callable[[bytes], bool] | None = None, **where: Any) -> str:
    """The text of a blob object, as ``encode`` took it: decompressed within the blob bound
    (``limits.LIMITS["blob"]``), its size and digest checked (``check``: the keyed digest of an
    encrypted archive; default sha256 = ``name``), decoded as UTF-8. Anything else is refused typed."""
    key = layout.blob_key(name, sealed=check is not None)
    try:
        raw = codec.decompress(data, what=f"blob {key!r}", kind="blob")
    except IntegrityError as exc:
        raise type(exc)(str(exc), key=key, **where) from None
    if len(raw) != size:
        raise TruncatedObject(f"blob is {len(raw)} bytes, its reference says {size}", key=key, **where)
    if not (check(raw) if check is not None else codec.sha256(raw) == name):
        raise DigestMismatch("blob content differs from its name", key=key, **where)
    try:
        return raw.decode()
    except UnicodeDecodeError:
        raise TruncatedObject("blob is not UTF-8 text", key=key, **where) from None
