"""Serialisation, compression and digests: the only place bytes are made.

Canonical JSON (sorted keys, no NaN) makes digests stable, so the same state
always hashes the same. zstd frames are decompressed with a size cap so a
hostile object cannot exhaust memory.
"""

from __future__ import annotations

import hashlib
import math
from typing import Any

import orjson
import zstandard

from .errors import InvalidState, TruncatedObject, UnsupportedFormatVersion

FORMAT_VERSION = 1
MAX_DECOMPRESSED = 1 << 31  # 2 GiB: far above any sane state, far below a bomb
_ZSTD_LEVEL = 9
_compressor = zstandard.ZstdCompressor(level=_ZSTD_LEVEL)


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


def json_copy_raw(value: Any, where: str = "state") -> tuple[Any, bytes]:
    """``json_copy`` and the canonical bytes it was made from (``dumps(value)``, without a second pass)."""
    try:
        wrapped: Any = value
        for _ in range(_MARGIN):
            wrapped = [wrapped]
        raw = dumps(wrapped)
        copy = orjson.loads(raw)  # canonical: the copy's keys are sorted, as stored
        if copy == wrapped:
            for _ in range(_MARGIN):
                copy = copy[0]
            return copy, raw[_MARGIN:-_MARGIN]
    except (TypeError, orjson.JSONEncodeError, RecursionError):
        pass
    _walk(value, where, 0)
    raise InvalidState(f"{where}: does not round-trip through JSON")


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


def loads(data: bytes | str) -> Any:
    return orjson.loads(data)


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


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


def compress(data: bytes) -> bytes:
    return _compressor.compress(data)


def decompress(data: bytes, *, what: str = "object") -> bytes:
    try:
        return zstandard.ZstdDecompressor().decompress(data, max_output_size=MAX_DECOMPRESSED)
    except zstandard.ZstdError as exc:
        raise TruncatedObject(f"{what} is not a valid zstd frame ({exc})") from None


def check_format(doc: Any, what: str) -> dict[str, Any]:
    """Validate the envelope every stored JSON document carries."""
    if not isinstance(doc, dict):
        raise TruncatedObject(f"{what} is not a JSON object")
    version = doc.get("format_version")
    if version != FORMAT_VERSION:
        raise UnsupportedFormatVersion(
            f"{what} has format_version {version!r}; this ckpt_archive reads version {FORMAT_VERSION}"
        )
    return doc


def decode_document(data: bytes, what: str, *, compressed: bool = False) -> dict[str, Any]:
    """Bytes -> checked envelope dict, with typed errors instead of parser tracebacks."""
    raw = decompress(data, what=what) if compressed else data
    try:
        doc = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise TruncatedObject(f"{what} is not valid JSON ({exc})") from None
    return check_format(doc, what)
