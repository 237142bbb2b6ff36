"""Serialisation, compression and digests: the only place bytes are made.

Canonical JSON (sorted keys, no NaN) makes digests stable, so the same state
always hashes the same. A zstd frame is decompressed only when the content size its
header declares is within the bound of its kind (``limits``), so a hostile object
cannot exhaust memory.
"""

from __future__ import annotations

import contextlib
import hashlib
import math
import threading
from collections import OrderedDict
from collections.abc import Hashable
from typing import Any

import orjson
import zstandard

from . import limits, versions
from .errors import InvalidState, TruncatedObject, UnsupportedFormatVersion
from .format import dictionary

_ZSTD_LEVEL = 9
_compressor = zstandard.ZstdCompressor(level=_ZSTD_LEVEL)
HOT_LEVEL = 3
"""The level of the objects written on a save's path, every call (a commit entry, a LangGraph write
object): measured on W1 through ``ArchiveSaver`` (docs/design/010-lean-put.md), a ~2.6 KB commit entry
is 1,083 bytes in 20 µs at 3 against 1,042 bytes in 80 µs at 9. The head hint too: it is rewritten every
few saves and carries its chain's inline ops, up to ~1 MB of JSON after a LangGraph ``DeltaChannel`` seed
(35 hints of W1 through a graph: 446 ms at 9 against 11 ms at 3, for 627 KB against 715 KB, and only
the newest is kept). Larger objects written once per snapshot or maintenance (snapshots, folds,
parts) keep ``_ZSTD_LEVEL``."""
_hot_compressor = zstandard.ZstdCompressor(level=HOT_LEVEL)
_DICTIONARY = zstandard.ZstdCompressionDict(dictionary.TEXT, dict_type=zstandard.DICT_TYPE_RAWCONTENT)
_local = threading.local()  # compressors with the dictionary, per thread (an instance is not thread-safe)


# orjson refuses more than 254 nested containers; stored documents wrap a state value in a few
# more (commit entry -> actions -> action -> ops -> op -> value), so states stop well short of it.
MAX_DEPTH = 200
_MARGIN = 254 - MAX_DEPTH  # extra levels the fast path wraps around a value to enforce MAX_DEPTH


def check_json(value: Any, where: str = "state") -> None:
    """Refuse anything that does not round-trip through JSON exactly.

    Raises InvalidState naming the path of the first offending value. The common
    case is one C-speed round trip; only a failure walks the value in Python to
    say where the problem is.
    """
    json_copy(value, where)


def json_copy(value: Any, where: str = "state") -> Any:
    """``check_json`` that also returns the round trip: a private deep copy, for free."""
    return json_copy_raw(value, where)[0]


def json_copy_raw(value: Any, where: str = "state", series: str | None = None) -> tuple[Any, bytes]:
    """``json_copy`` and the canonical bytes it was made from (``dumps(value)``, without a second pass).

    ``series`` names values that mostly grow (a thread id): the copy made last time for the same
    ``where`` and series lends its unchanged parts, so only what changed is parsed (see ``_reuse``).
    """
    slot = None if series is None else (where, series)
    try:
        last = None if slot is None else _copies.get(slot)
        # the same bytes as ``dumps(value)``; with a copy to build on, the text of each part for ``_reuse``
        tree = _texts(value, 0) if last is not None else None
        raw = _dumps_within_depth(value, 0) if tree is None else tree[0]
        copy: Any = _MISSING
        texts: dict[int, bytes] = {}
        if last is not None:
            with contextlib.suppress(_NotSure):
                copy = last[1] if raw == last[0] else _reuse(last[1], value, last[2], texts, tree)
                texts = last[2] if copy is last[1] else texts
        if copy is _MISSING:
            copy = orjson.loads(raw)  # canonical: the copy's keys are sorted, as stored
        # the copy is plain JSON whose canonical text is ``raw``, so this is "loads(dumps(value)) == value"
        if copy == value:
            if slot is not None:
                _copies.put(slot, raw, copy, texts)
            return copy, raw
    except (TypeError, orjson.JSONEncodeError, RecursionError):
        pass
    _walk(value, where, 0)
    raise InvalidState(f"{where}: does not round-trip through JSON")


def canonical(value: Any, where: str = "state") -> bytes:
    """``dumps(value)`` within ``MAX_DEPTH``, for a value its caller built of JSON types only (not
    checked as ``json_copy_raw`` checks, and not copied): what orjson refuses is still ``InvalidState``
    naming the path (a non-str key, an int past 64 bits, a lone surrogate, too deep)."""
    try:
        return _dumps_within_depth(value, 0)
    except (TypeError, orjson.JSONEncodeError, RecursionError):
        _walk(value, where, 0)
        raise InvalidState(f"{where}: does not round-trip through JSON") from None


def extends(old: bytes, new: bytes) -> bool:
    """Is ``new`` the canonical text of a list that starts with the items of the non-empty list whose
    text is ``old``, and has more? ``[a1,...,an,`` leads ``new`` exactly then: JSON values end where
    their text says, and the comma rules out a number that merely starts like one of the old items."""
    return len(old) > 2 and new.startswith(old[:-1]) and new[len(old) - 1 : len(old)] == b","


def _dumps_within_depth(value: Any, level: int) -> bytes:
    """``dumps(value)`` for a value ``level`` containers deep, refusing more than MAX_DEPTH in all."""
    wrapped, margin = value, _MARGIN + level
    for _ in range(margin):
        wrapped = [wrapped]
    return dumps(wrapped)[margin:-margin]


_PART_KEYS = 64
_PART_LEVELS = 4

Texts = tuple[bytes, "dict[str, Texts] | None"]
"""The canonical text of a value and, for a small dict, the ``Texts`` of each of its values (key order)."""


def _texts(value: Any, level: int) -> Texts:
    """``dumps(value)`` for a value ``level`` containers deep, with the text of each part: small dicts
    with plain string keys, down to ``_PART_LEVELS``, are joined from the texts of their values, so a
    list deep in a state (the LangGraph saver's messages, three dicts down) is serialised once and
    ``_reuse`` compares that text with the last one, rather than serialising the list again."""
    if (
        level >= _PART_LEVELS
        or type(value) is not dict
        or len(value) > _PART_KEYS
        or not all(type(k) is str for k in value)
    ):
        return _dumps_within_depth(value, level), None
    children = {k: _texts(value[k], level + 1) for k in sorted(value)}
    return _join_parts({k: child[0] for k, child in children.items()}), children


def _join_parts(parts: dict[str, bytes]) -> bytes:
    """``dumps`` of the dict whose values' texts are ``parts``, copying each text once per level of
    ``_texts`` (a chat's message list is megabytes: concatenating it piece by piece copied it four times)."""
    pieces = [b"{"]
    for k, text in parts.items():
        pieces += (dumps(k), b":", text, b",")
    if len(pieces) > 1:
        pieces.pop()
    pieces.append(b"}")
    return b"".join(pieces)


class _NotSure(Exception):
    """``_reuse`` met something only the full round trip can judge."""


_MISSING: Any = object()


def _reuse(
    base: Any,
    value: Any,
    known: dict[int, bytes],
    texts: dict[int, bytes],
    tree: Texts | None = None,
) -> Any:
    """A plain-JSON copy of ``value`` that shares the parts of ``base`` (an earlier copy) whose
    canonical text is unchanged: an unchanged list is ``base``'s, a list that grew is ``base``'s items
    plus the parsed new ones. Only exact JSON types are copied here; anything else is ``_NotSure``.

    ``known``: the canonical text of lists of ``base`` by id (``base`` keeps them alive); ``texts`` is
    filled with those of the copy's lists. ``tree``: the canonical texts of ``value`` and its parts
    (``_texts``), when the caller has them. Callers have already dumped ``value`` whole, which
    refused what orjson refuses (non-string keys, huge ints, lone surrogates, depth), so an exact str,
    int or bool is its own copy.
    """
    kind = type(value)
    parts = tree[1] if tree is not None else None
    if kind is dict:
        if type(base) is not dict:
            return orjson.loads(tree[0] if tree is not None else dumps(value))
        out = {  # in canonical (sorted) key order, as ``loads`` of the text would give
            k: _reuse(base[k], value[k], known, texts, parts[k] if parts else None)
            if k in base
            else orjson.loads(parts[k][0] if parts else dumps(value[k]))
            for k in sorted(value)
        }
        same = len(out) == len(base) and all(v is base.get(k, _MISSING) for k, v in out.items())
        return base if same else out
    if kind is list:
        new = tree[0] if tree is not None else dumps(value)
        if type(base) is not list or not base:
            return orjson.loads(new)
        old = known.get(id(base)) or dumps(base)
        if old == new:
            copy = base
        elif extends(old, new):
            copy = base + orjson.loads(b"[" + new[len(old) :])
        else:
            copy = orjson.loads(new)
        texts[id(copy)] = new
        return copy
    if kind is str or kind is int or kind is bool or value is None:
        return value
    if kind is float and math.isfinite(value):
        return value
    raise _NotSure


class _Copies:
    """The last copy made for each of a few slots, bounded in count and in bytes of canonical text.

    A hit is only a base to compare against (``_reuse`` checks the text of every part it keeps), so
    a stale or foreign entry costs time, never correctness. Entries are shared, never mutated.
    """

    def __init__(self, slots: int = 8, max_bytes: int = 16 << 20) -> None:
        self._slots, self._max_bytes, self._bytes = slots, max_bytes, 0
        self._entries: OrderedDict[Hashable, tuple[bytes, Any, dict[int, bytes]]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, slot: Hashable) -> tuple[bytes, Any, dict[int, bytes]] | None:
        with self._lock:
            return self._entries.get(slot)

    def put(self, slot: Hashable, raw: bytes, copy: Any, texts: dict[int, bytes]) -> None:
        with self._lock:
            old = self._entries.pop(slot, None)
            self._bytes -= 0 if old is None else len(old[0])
            if len(raw) > self._max_bytes // 2:
                return
            self._entries[slot] = (raw, copy, texts)
            self._bytes += len(raw)
            while len(self._entries) > self._slots or self._bytes > self._max_bytes:
                self._bytes -= len(self._entries.popitem(last=False)[1][0])


_copies = _Copies()


def _walk(value: Any, where: str, _depth: int) -> None:
    if _depth > MAX_DEPTH:
        raise InvalidState(f"{where}: nesting deeper than {MAX_DEPTH} levels")
    if value is None or isinstance(value, bool):
        return
    if isinstance(value, str):
        _check_str(value, where)
        return
    if isinstance(value, int):
        if abs(value) >= 1 << 63:
            raise InvalidState(f"{where}: integer {value} does not fit in 64 bits")
        return
    if isinstance(value, float):
        if not math.isfinite(value):
            raise InvalidState(f"{where}: {value} is not representable in JSON")
        return
    if isinstance(value, dict):
        for k, v in value.items():
            if not isinstance(k, str):
                raise InvalidState(f"{where}: key {k!r} is not a string")
            _check_str(k, f"{where}: key")
            _walk(v, f"{where}[{k!r}]", _depth + 1)
        return
    if isinstance(value, list):
        for i, v in enumerate(value):
            _walk(v, f"{where}[{i}]", _depth + 1)
        return
    raise InvalidState(f"{where}: {type(value).__name__} is not JSON (use str, int, float, bool, None, list, dict)")


def _check_str(value: str, where: str) -> None:
    if value.isascii():
        return
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidState(f"{where}: string is not valid unicode (lone surrogate)") from None


def dumps(value: Any) -> bytes:
    """Canonical JSON bytes (sorted keys)."""
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS)


def stored_dumps(value: Any, what: str) -> bytes:
    """``dumps`` of a value read from storage, whose digest is checked: orjson reads 1,024 levels of
    nesting but writes 254, so a value nested between the two (no writer makes one: ``MAX_DEPTH``)
    is damage (``TruncatedObject``), not a ``JSONEncodeError`` from deep inside a read."""
    try:
        return dumps(value)
    except orjson.JSONEncodeError as exc:
        raise TruncatedObject(f"{what} cannot be encoded again ({exc}): nested deeper than any writer nests") from None


def stored_copy(value: Any, what: str = "stored value") -> Any:
    """A private deep copy of a value that is JSON already (read from storage, or a state built of
    ``loads`` output): one orjson round trip, not ``json_copy``'s check that it round-trips, which such
    a value does by construction (a LangGraph read copies every state value it hands out: the states
    are cached and LangGraph edits what it is given)."""
    return orjson.loads(stored_dumps(value, what))


def loads(data: bytes | str) -> Any:
    return orjson.loads(data)


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def content_digest(value: Any) -> str:
    """The one digest of a content: sha256 of its canonical JSON (``dumps``). A record's
    ``state_sha256`` / ``messages_sha256`` and a checkpoint's ``Protection`` are this digest
    (``PrefixHasher`` computes the same for contents that grow)."""
    return sha256(dumps(value))


class PrefixHasher:
    """sha256 of byte strings that mostly extend the previous one (the canonical JSON of a growing
    chat, save after save or checkpoint after checkpoint of a listing).

    Hashing resumes from the hasher state saved at the last ``STEP`` boundary before the first byte
    that differs from the previous input, so a state that grew by one message costs at most ``STEP``
    bytes plus what changed, not the whole state. Any input gives exactly ``sha256(raw)``.
    """

    STEP = 1 << 16
    __slots__ = ("_raw", "_states", "_step")

    def __init__(self, step: int = STEP) -> None:
        self._step = step
        self._raw = b""
        self._states: list[Any] = [hashlib.sha256()]  # _states[i]: the hasher after _raw[: i * STEP]

    def hexdigest(self, raw: bytes) -> str:
        step, old = self._step, self._raw
        same, top = 0, min(len(old), len(raw)) // step
        while same < top and old[same * step : (same + 1) * step] == raw[same * step : (same + 1) * step]:
            same += 1  # (bytes slices compare with memcmp; memoryview slices would go byte by byte)
        states = self._states[: same + 1]
        h = states[same].copy()
        view, pos, full = memoryview(raw), same * step, len(raw) - len(raw) % step
        while pos < full:
            h.update(view[pos : pos + step])
            pos += step
            states.append(h.copy())
        h.update(view[pos:])
        self._raw, self._states = raw, states
        return str(h.hexdigest())


ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
"""First bytes of every zstd frame: no JSON document starts with them."""


def compress(data: bytes, kind: str = "object", *, hot: bool = False) -> bytes:
    """One zstd frame of ``data``, declaring its size; a log document (``kind`` in ``dictionary.KINDS``)
    is compressed with the format's dictionary (spec.md section 6). ``hot``: at ``HOT_LEVEL`` (an object
    written by every save)."""
    level = HOT_LEVEL if hot else _ZSTD_LEVEL
    if kind not in dictionary.KINDS:
        return (_hot_compressor if hot else _compressor).compress(data)
    compressors: dict[int, zstandard.ZstdCompressor] | None = getattr(_local, "compressors", None)
    if compressors is None:
        compressors = _local.compressors = {}
    if (compressor := compressors.get(level)) is None:
        compressor = compressors[level] = zstandard.ZstdCompressor(level=level, dict_data=_DICTIONARY)
    return bytes(compressor.compress(data))


def _decompressor(kind: str) -> zstandard.ZstdDecompressor:
    """A log document's frames refer to the format's dictionary; a frame that refers to none (or to
    less of it) decodes the same with it, so a reader never guesses which."""
    return (
        zstandard.ZstdDecompressor(dict_data=_DICTIONARY) if kind in dictionary.KINDS else zstandard.ZstdDecompressor()
    )


_SUSPECT_RATIO = 64
"""A frame that expands more than this (canonical JSON of real states: 3-20x) has its values counted
as it streams (``_streamed_values``), before it is decompressed whole."""
_WINDOW = 1 << 20


def decompress(data: bytes, *, what: str = "object", kind: str = "object") -> bytes:
    """The content of one zstd frame, refused (``ObjectTooLarge``) before any allocation when the
    size its header declares is over the bound of ``kind`` (``limits.LIMITS``), and before it is
    parsed when it holds more JSON values than a ``kind`` holds (``limits.VALUES``). Writers always
    declare the size (``compress``), so a frame that does not is refused too: its size would only be
    known once the memory was spent.

    The values of a frame that expands suspiciously well (``_SUSPECT_RATIO``: an 11 KB frame of
    ``[],[],...`` declares 127 MiB) are counted as it streams, one ``_WINDOW`` at a time, so a bomb
    costs its reader a window, not its declared size; any other is counted once decompressed."""
    try:
        size = zstandard.frame_content_size(data)
    except zstandard.ZstdError as exc:
        raise TruncatedObject(f"{what} is not a valid zstd frame ({exc})") from None
    if size < 0:  # -1: not declared in the header
        raise TruncatedObject(f"{what} is a zstd frame that does not declare its content size")
    limits.check_read(kind, size, what)
    streamed = limits.may_exceed(kind, size) and size > _SUSPECT_RATIO * len(data)
    if streamed:
        limits.check_values(kind, _streamed_values(data, what, limits.VALUES[kind], kind), what)
    try:
        # one frame and nothing after it: bytes appended to a stored object are damage, not padding; the
        # output buffer is the declared size (bounded above), and a frame that produces more or less
        # than it declared is a ZstdError
        out = bytes(_decompressor(kind).decompress(data, allow_extra_data=False))
    except zstandard.ZstdError as exc:
        raise TruncatedObject(f"{what} is not a valid zstd frame ({exc})") from None
    if not streamed:
        limits.check_values(kind, limits.over_values(kind, out), what)
    return out


def _streamed_values(data: bytes, what: str, bound: int, kind: str) -> int | None:
    """``limits.values`` of the frame's content, counted one window at a time (stopping once over
    ``bound``); None when within it."""
    count = 0
    try:
        for window in _decompressor(kind).read_to_iter(data, write_size=_WINDOW):
            count += limits.values(window)
            if count > bound:
                return count
    except zstandard.ZstdError as exc:
        raise TruncatedObject(f"{what} is not a valid zstd frame ({exc})") from None
    return None


def check_format(doc: Any, what: str) -> dict[str, Any]:
    """Validate the envelope every stored JSON document carries (a version of ``versions.READABLE``)."""
    if not isinstance(doc, dict):
        raise TruncatedObject(f"{what} is not a JSON object")
    version = doc.get("format_version")
    if type(version) is not int or not versions.readable(version):
        known = " or ".join(map(str, versions.READABLE))
        raise UnsupportedFormatVersion(
            f"{what} has format_version {version!r}; this ckpt_archive reads version {known}"
        )
    return doc


def decode_document(
    data: bytes,
    what: str,
    *,
    compressed: bool = False,
    kind: str = "object",
) -> dict[str, Any]:
    """Bytes -> checked envelope dict, with typed errors instead of parser tracebacks (``kind``: the
    ``limits`` bound of a compressed document)."""
    raw = decompress(data, what=what, kind=kind) if compressed else data
    try:
        doc = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise TruncatedObject(f"{what} is not valid JSON ({exc})") from None
    return check_format(doc, what)
