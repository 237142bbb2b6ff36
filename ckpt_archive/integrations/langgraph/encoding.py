"""Pure mapping between LangGraph checkpoints and archive checkpoint states (no I/O).

Thread mapping (reversible): a LangGraph ``(thread_id, checkpoint_ns)`` pair is stored as the archive
thread ``esc(thread_id)`` for the root namespace and ``esc(thread_id) + "#" + esc(checkpoint_ns)``
otherwise, where ``esc`` percent-escapes ``%`` and ``#``. A thread id without those characters is
therefore its own archive thread for the root namespace.

State of one archive checkpoint (JSON, so the archive's delta engine diffs it)::

    {"checkpoint": {v, id, ts, channel_versions, versions_seen, ...}   # or "checkpoint_typed": [t, b64]
     "channels": {name: [t, b64]                      # one serde blob
                       | {"items": [[t, b64], ...]}},   # a list, element by element
                                                         # (a versioned channel without a value: absent)
     "metadata_typed": {key: [t, b64]},      # only metadata values that are not JSON
     "folded": {name: {"seed": [t, b64]?, "writes": [[task_id, channel, t, b64], ...]}}}

Values only ever go through the saver's serde (``dumps_typed``/``loads_typed``), and never as pickle
(``serde.py`` says what a stored value may construct); bytes are base64. A channel whose version did
not move copies its parent's entry verbatim, so the delta is empty for it; a list that grew by
appending keeps its old elements' encodings, so the delta is an ``append``.
"""

from __future__ import annotations

import binascii
from typing import Any

import pybase64  # SIMD base64: decoding a 1,000-message history was a fifth of a load

from ...codec import check_json, json_copy
from ...errors import CheckpointError, InvalidState
from ...model import RESERVED_PREFIX
from .serde import UnreadableValue, check_encoding

LG_KEY = RESERVED_PREFIX + "langgraph"
"""Record metadata key holding ``{"id": langgraph checkpoint id, "parent": its parent id}``."""

Blob = list[str]  # [type, base64 bytes]


def _esc(value: str) -> str:
    return value.replace("%", "%25").replace("#", "%23")


def _unesc(value: str) -> str:
    return value.replace("%23", "#").replace("%25", "%")


def archive_thread(thread_id: str, checkpoint_ns: str) -> str:
    if not isinstance(thread_id, str) or not thread_id:
        raise InvalidState(f"LangGraph thread_id must be a non-empty string, got {thread_id!r}")
    base = _esc(thread_id)
    return base if not checkpoint_ns else f"{base}#{_esc(checkpoint_ns)}"


def split_thread(archive_thread_id: str) -> tuple[str, str]:
    """Inverse of ``archive_thread``."""
    base, _, ns = archive_thread_id.partition("#")
    return _unesc(base), _unesc(ns)


class SerdeCodec:
    """Blobs through a LangGraph ``SerializerProtocol``, kept JSON as ``[type, base64]``.

    ``raw`` caches base64-decoded bytes by their text: listing a thread decodes the same list
    elements in every checkpoint, and decoding base64 is most of that work. Only bytes are shared;
    every value is still made by the serde afresh, so no two tuples share an object.
    """

    RAW_LIMIT = 200_000

    def __init__(
        self, serde: Any, raw: dict[str, bytes] | None = None, limit: int = RAW_LIMIT, where: str = ""
    ) -> None:
        self.serde = serde
        self.raw = raw
        self.limit = limit
        self.where = where

    def at(self, thread_id: str, checkpoint_ns: str, checkpoint_id: str | None) -> SerdeCodec:
        """This codec (same serde, same cache), naming in its errors the checkpoint it decodes."""
        ns = f", namespace {checkpoint_ns!r}" if checkpoint_ns else ""
        cid = f", checkpoint {checkpoint_id!r}" if checkpoint_id else ""
        return SerdeCodec(self.serde, self.raw, self.limit, f" of thread {thread_id!r}{ns}{cid}")

    def _keep(self, text: str, data: bytes) -> None:
        if self.raw is not None:
            if len(self.raw) >= self.limit:
                self.raw.clear()
            self.raw[text] = data

    def dumps(self, value: Any) -> Blob:
        return _blob(*self.serde.dumps_typed(value))

    def loads(self, blob: Any) -> Any:
        return self.loads_many([blob])[0]

    def loads_many(self, blobs: list[Any]) -> list[Any]:
        """Values of stored blobs, in order (one loop: a listed history decodes ~n^2/2 of them).

        The one place a stored value meets the serde, so the one place its failures become typed:
        whatever the serde raises on a value it refuses (LangChain's reviver: a ``ValueError`` for an
        ``lc: 1`` constructor outside its allowlist or a jinja2 template, which it refuses before
        constructing, so nothing renders; ormsgpack: one for ext nested past its depth; ``json``: a
        ``RecursionError``) is an ``UnreadableValue`` naming the checkpoint (``at``), on one line."""
        raw, loads_typed, out = self.raw, self.serde.loads_typed, []
        for blob in blobs:
            if not (type(blob) is list and len(blob) == 2 and type(blob[0]) is str and type(blob[1]) is str):
                raise CheckpointError(f"stored LangGraph value{self.where} is malformed: {str(blob)[:100]}")
            check_encoding(blob[0])
            data = None if raw is None else raw.get(blob[1])
            if data is None:
                data = _unbase64(blob[1])
                self._keep(blob[1], data)
            try:
                out.append(loads_typed((blob[0], data)))
            except NotImplementedError:  # JsonPlusSerializer's word for a type it does not know
                raise CheckpointError(
                    f"stored LangGraph value{self.where} has encoding {blob[0][:40]!r}, unknown to this saver's "
                    "serde; read it with the serde that wrote it"
                ) from None
            except CheckpointError:
                raise
            except Exception as exc:  # the serde refused it: any type, from LangGraph, LangChain or ormsgpack
                first = (str(exc).strip().splitlines() or [""])[0][:120]
                raise UnreadableValue(
                    f"stored LangGraph value{self.where} (encoding {blob[0][:40]!r}) is refused by this saver's "
                    f"serde ({type(exc).__name__}: {first}); it names a type or nesting the serde does not "
                    "allow: read it with the serde and allowed_types that wrote it, or delete the checkpoint"
                ) from exc
        return out

    def encode_channel(self, value: Any, old: Any) -> Any:
        """One channel entry; a list reuses the encodings of ``old``'s items it still starts with.

        Every element still goes through the serde (an element mutated in place must be seen); with
        ``raw`` holding the bytes of the old items (the saver keeps them from put to put), an element
        whose bytes are unchanged reuses the old text without being base64-encoded again."""
        if type(value) is not list:
            return self.dumps(value)
        old_items = old.get("items") if isinstance(old, dict) else None
        priors: list[Any] = old_items if type(old_items) is list else []
        known, dumps_typed = self.raw if self.raw is not None else {}, self.serde.dumps_typed
        items: list[Blob] = []
        append = items.append
        for element, prior in zip(value, priors, strict=False):  # a tight loop: every message, every put
            typ, data = dumps_typed(element)
            if type(prior) is list and len(prior) == 2 and prior[0] == typ and known.get(prior[1]) == data:
                append(prior)
            else:
                append(self._encode(typ, data, element, prior))
        for element in value[len(priors) :]:
            typ, data = dumps_typed(element)
            append(self._encode(typ, data, element, None))
        return {"items": items}

    def _encode(self, typ: str, data: bytes, element: Any, prior: Any) -> Blob:
        blob = _blob(typ, data)
        self._keep(blob[1], data)
        # a non-deterministic serde (encryption): an element equal to the old one keeps its encoding
        if prior is not None and blob != prior and _same(self.loads(prior), element):
            return prior  # type: ignore[no-any-return]
        return blob

    def decode_channel(self, entry: Any) -> Any:
        if isinstance(entry, dict):
            items = entry.get("items", [])
            return self.loads_many(items if type(items) is list else [items])
        return self.loads(entry)


def _blob(typ: str, data: bytes) -> Blob:
    check_encoding(typ)  # refused when read, so never stored
    return [typ, pybase64.b64encode_as_string(data)]


def _unbase64(text: str) -> bytes:
    try:
        return pybase64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise CheckpointError(f"stored LangGraph value is not base64: {text[:100]!r}") from None


def _same(a: Any, b: Any) -> bool:
    try:
        return type(a) is type(b) and bool(a == b)
    except Exception:
        return False


def _is_json(value: Any) -> bool:
    try:
        check_json(value)
    except CheckpointError:
        return False
    return True


def build_state(
    codec: SerdeCodec,
    checkpoint: dict[str, Any],
    new_versions: dict[str, Any],
    parent: dict[str, Any] | None,
    metadata_typed: dict[str, Blob],
) -> dict[str, Any]:
    """The archive state of a LangGraph checkpoint, reusing ``parent``'s (an archive state) entries."""
    skeleton = {k: v for k, v in checkpoint.items() if k != "channel_values"}
    values: dict[str, Any] = checkpoint.get("channel_values") or {}
    old_channels: dict[str, Any] = (parent or {}).get("channels", {})
    old_versions: dict[str, Any] = (parent or {}).get("checkpoint", {}).get("channel_versions", {})
    channels: dict[str, Any] = {}
    for name, version in (checkpoint.get("channel_versions") or {}).items():
        old = old_channels.get(name)
        if name in new_versions:
            if name in values:
                channels[name] = codec.encode_channel(values[name], old)
        elif name in old_versions and _is_json(version) and old_versions[name] == version:
            if old is not None:  # unchanged: the parent's entry (or its absence) verbatim
                channels[name] = old
        elif name in values:
            channels[name] = codec.encode_channel(values[name], old)
    state: dict[str, Any] = {"channels": channels}
    if _is_json(skeleton):
        state["checkpoint"] = skeleton
    else:
        state["checkpoint_typed"] = codec.dumps(skeleton)
    if metadata_typed:
        state["metadata_typed"] = metadata_typed
    return state


def split_metadata(codec: SerdeCodec, metadata: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Blob]]:
    """JSON metadata (stored in the manifest record, filterable) and the rest (serde blobs)."""
    plain: dict[str, Any] = {}
    typed: dict[str, Blob] = {}
    for key, value in metadata.items():
        if isinstance(key, str) and not key.startswith(RESERVED_PREFIX) and _is_json(value):
            plain[key] = value
        else:
            typed[str(key)] = codec.dumps(value)
    return plain, typed


def restore_checkpoint(codec: SerdeCodec, state: dict[str, Any]) -> dict[str, Any]:
    if "checkpoint_typed" in state:
        skeleton: dict[str, Any] = dict(codec.loads(state["checkpoint_typed"]))
    else:  # a deep copy: the state is shared with the caches, and LangGraph edits what it is given
        skeleton = json_copy(state["checkpoint"])
    skeleton["channel_values"] = {name: codec.decode_channel(e) for name, e in state.get("channels", {}).items()}
    return skeleton


def restore_metadata(
    codec: SerdeCodec, record_metadata: dict[str, Any], state: dict[str, Any] | None
) -> dict[str, Any]:
    out = {k: v for k, v in record_metadata.items() if k != LG_KEY}
    for key, blob in ((state or {}).get("metadata_typed") or {}).items():
        out[key] = codec.loads(blob)
    return out
