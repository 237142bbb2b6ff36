"""Pure mapping between LangGraph checkpoints and archive checkpoint states (no I/O).

Thread mapping (reversible): a LangGraph ``(thread_id, checkpoint_ns)`` pair is stored as the archive
thread ``esc(thread_id)`` for the root namespace and ``esc(thread_id) + "#" + esc(checkpoint_ns)``
otherwise, where ``esc`` percent-escapes ``%`` and ``#``. A thread id without those characters is
therefore its own archive thread for the root namespace.

State of one archive checkpoint (JSON, so the archive's delta engine diffs it)::

    {"checkpoint": {v, id, ts, channel_versions, versions_seen, ...}   # or "checkpoint_typed": [t, b64]
     "channels": {name: <cell>},        # a list value is {"items": [<cell>, ...]}, element by element
                                        # (a versioned channel without a value: absent)
     "metadata_typed": {key: [t, b64]},      # only metadata values that are not JSON
     "folded": {name: {"seed": <cell>?, "writes": [[task_id, channel, <cell>], ...]}}}

A cell (``values.py``) is a LangChain message or a plain value as JSON, checked exact at save, or the
saver's serde bytes (``dumps_typed``) as ``[type, base64]`` for everything else, and for every value
when the serde is not LangGraph's plain one (an ``EncryptedSerializer``). Never pickle (``serde.py``
says what a stored value may construct). A channel whose version did not move copies its parent's
entry verbatim, so the delta is empty for it; a list that grew by appending keeps its old elements'
cells, so the delta is an ``append`` of the new ones.
"""

from __future__ import annotations

import binascii
from typing import Any

import orjson
import pybase64  # SIMD base64: decoding a 1,000-message history was a fifth of a load
from langchain_core.messages import BaseMessage
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from ...codec import check_json, json_copy, stored_copy
from ...errors import CheckpointError, InvalidState
from ...model import LANGGRAPH_KEY, RESERVED_PREFIX
from . import held as H
from . import values as V
from .serde import UnreadableValue, check_encoding

LG_KEY = LANGGRAPH_KEY
"""Record metadata key holding ``{"id": langgraph checkpoint id, "parent": its parent id, "values":
[channels stored with a value]}`` (``model.LANGGRAPH_KEY``)."""

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
    MESSAGES_LIMIT = 8_192
    """Messages a ``messages`` memo holds before it starts over (each kept by its cell's text and by
    the identity of the cell last met, ``_message``)."""

    def __init__(
        self,
        serde: Any,
        raw: dict[str, bytes] | None = None,
        limit: int = RAW_LIMIT,
        where: str = "",
        texts: V.Texts | None = None,
        messages: dict[Any, Any] | None = None,
        lists: H.Lists | None = None,
    ) -> None:
        self.serde = serde
        self.raw = raw
        self.texts = texts
        """Canonical texts of ``json`` cells by id (``values.plain_cell``), kept by the saver between puts."""
        self.lists = lists
        """The lists of cells the saver's puts stored, with their text (``held.Lists``): a list channel
        that grew is checked against its parent's in one pass (``held.kept_prefix``)."""
        self.limit = limit
        self.where = where
        self.messages = messages
        """Messages decoded so far, by the JSON text of their cell: a listed history holds the same
        messages in every checkpoint (~n^2/2 of them), each is validated once and then copied afresh
        (``values.fresh_copy``)."""
        self.readable = type(serde) is JsonPlusSerializer
        """Values as JSON where exact (``values.py``): only with LangGraph's plain serde, whose output is
        readable anyway; any other (``EncryptedSerializer``, a serde of the user's own) sees every value."""

    def at(self, thread_id: str, checkpoint_ns: str, checkpoint_id: str | None) -> SerdeCodec:
        """This codec (same serde, same cache), naming in its errors the checkpoint it decodes."""
        ns = f", namespace {checkpoint_ns!r}" if checkpoint_ns else ""
        cid = f", checkpoint {checkpoint_id!r}" if checkpoint_id else ""
        where = f" of thread {thread_id!r}{ns}{cid}"
        return SerdeCodec(self.serde, self.raw, self.limit, where, self.texts, self.messages, self.lists)

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

    def encode_channel(self, value: Any, old: Any, depth: int = 0, *, keep: bool = True) -> Any:
        """One channel entry (a cell, ``values.py``); a list reuses the cells of ``old``'s items it still
        starts with.

        Every element is still encoded (an element mutated in place must be seen), and an element whose
        encoding is unchanged keeps the old cell: the same JSON text, or the same serde bytes (with
        ``raw`` holding the bytes of the old items, kept by the saver from put to put), so the delta of
        a list that grew is an append of its new elements. When the old items are a list this saver
        put (``lists``), the elements the list still starts with are checked against them in one pass
        (``held.kept_prefix``), each new element alone. ``depth``: tagged containers around it; ``keep``:
        note the list for the next put (not a pending write's: no put starts from it)."""
        if type(value) is list:
            old_items = old.get(V.ITEMS) if type(old) is dict and len(old) == 1 else None
            priors: list[Any] = old_items if type(old_items) is list else []
            cell, inner, lists = self.cell, depth + 1, self.lists if self.readable and keep else None
            held = lists.get(id(priors)) if lists is not None and priors else None
            if held is not None and held[0] is not priors:
                held = None
            same = held is not None and H.same_prefix(value, held)
            if held is not None and not same and not H.kept_prefix(value, held):
                held = None
            if held is not None:
                items = [*priors, *(cell(element, None, inner) for element in value[len(priors) :])]
            else:
                items = [cell(element, prior, inner) for element, prior in zip(value, priors, strict=False)]
                items.extend(cell(element, None, inner) for element in value[len(priors) :])
            if lists is not None:
                H.keep_list(lists, items, value, held, len(priors), same)
            return {V.ITEMS: items}
        if self.readable and V.is_delta_snapshot(value):
            prior = old.get(V.SNAPSHOT) if type(old) is dict and len(old) == 1 else None
            return {V.SNAPSHOT: self.encode_channel(value.value, prior, depth + 1, keep=keep)}
        return self.cell(value, old, depth)

    def encode_value(self, value: Any) -> Any:
        """A pending write's value: a cell, a list element by element (``encode_channel`` without priors)."""
        return self.encode_channel(value, None, keep=False)

    def cell(self, value: Any, prior: Any, depth: int = 0) -> Any:
        """One value as a cell: JSON when the saver's serde is the plain one and JSON holds the value
        exactly (``values.py``), else the serde's bytes. ``depth``: tagged containers around it (a
        reader refuses a container at ``V.MAX_NESTING``, so none is written there)."""
        if self.readable:
            if isinstance(value, BaseMessage):
                found = V.message_cell(value, prior)
            else:
                found = V.plain_cell(value, prior, self.texts)
                if found is None and depth < V.MAX_NESTING:
                    found = self._container(value, prior, depth + 1)  # its members' depth
            if found is not None:
                return found
        return self._serde_cell(value, prior)

    def _container(self, value: Any, prior: Any, depth: int) -> Any:
        """A list or str-keyed dict that is not plain JSON (it holds messages, say), item by item."""
        t = type(value)
        if t is list:
            old = prior.get(V.ITEMS) if type(prior) is dict and len(prior) == 1 else None
            olds: list[Any] = old if type(old) is list else []
            return {V.ITEMS: [self.cell(v, olds[i] if i < len(olds) else None, depth) for i, v in enumerate(value)]}
        if t is dict and all(type(k) is str for k in value):
            old_d = prior.get(V.DICT) if type(prior) is dict and len(prior) == 1 else None
            oldd: dict[str, Any] = old_d if type(old_d) is dict else {}
            return {V.DICT: {k: self.cell(v, oldd.get(k), depth) for k, v in value.items()}}
        if V.is_delta_snapshot(value):
            old_s = prior.get(V.SNAPSHOT) if type(prior) is dict and len(prior) == 1 else None
            return {V.SNAPSHOT: self.cell(value.value, old_s, depth)}
        return None

    def _serde_cell(self, value: Any, prior: Any) -> Blob:
        typ, data = self.serde.dumps_typed(value)
        known = self.raw if self.raw is not None else {}
        if type(prior) is list and len(prior) == 2 and prior[0] == typ and known.get(prior[1]) == data:
            return prior
        return self._encode(typ, data, value, prior)

    def _encode(self, typ: str, data: bytes, element: Any, prior: Any) -> Blob:
        blob = _blob(typ, data)
        self._keep(blob[1], data)
        # a non-deterministic serde (encryption): an element equal to the old one keeps its encoding
        if not self.readable and type(prior) is list and blob != prior and _same(self.loads(prior), element):
            return prior
        return blob

    def decode_channel(self, entry: Any) -> Any:
        """The value of a stored channel entry or pending write (a cell, ``values.py``)."""
        return self.decode(entry, 0)

    decode_value = decode_channel

    def decode(self, cell: Any, depth: int) -> Any:
        t = type(cell)
        if t is list:
            return self.loads(cell)
        if t is str or t is int or t is float or t is bool:
            return cell
        if t is not dict:
            raise CheckpointError(f"stored LangGraph value{self.where} is malformed: {str(cell)[:100]}")
        tag = V.tag_of(cell, self.where)
        if tag is None:
            return self._message(cell)
        if tag == V.JSON:
            return stored_copy(cell[V.JSON], "stored LangGraph value")  # a private copy: states are cached
        if depth >= V.MAX_NESTING:
            raise CheckpointError(
                f"stored LangGraph value{self.where} nests more than {V.MAX_NESTING} tagged containers; "
                "no writer nests so deep: delete the checkpoint"
            )
        inner = cell[tag]
        if tag == V.ITEMS and type(inner) is list:
            return self._items(inner, depth + 1)
        if tag == V.DICT and type(inner) is dict:
            return {str(k): self.decode(v, depth + 1) for k, v in inner.items()}
        if tag == V.SNAPSHOT:
            return V.delta_snapshot(self.decode(inner, depth + 1))
        raise CheckpointError(f"stored LangGraph value{self.where} is malformed: {str(cell)[:100]}")

    def _message(self, cell: dict[str, Any]) -> BaseMessage:
        memo = self.messages
        if memo is None:
            return V.decode_message(cell, self.where)
        seen = _held(memo, cell)
        if seen is not None:
            return V.fresh_copy(seen)
        text = cell_text(cell)
        held = memo.get(text)
        message = held
        if held is None:
            # validated once, from the stored cell itself: kept, never handed out, so nobody can change
            # it or the cell parts it shares; what is handed out is a copy (a fifth of a validation,
            # and a listed history meets each message in every later checkpoint)
            held = V.decode_message(cell, self.where, private=False)
            message = V.fresh_copy(held)
        else:
            message = V.fresh_copy(held)
        if len(memo) >= 2 * self.MESSAGES_LIMIT:  # each message by its text and by its cell
            memo.clear()
        memo[text] = held
        _enter(memo, id(cell), cell, held)
        return message

    def _items(self, cells: list[Any], depth: int) -> list[Any]:
        """List elements, serde pairs decoded in one ``loads_many`` (a listed history decodes ~n^2/2).

        With a ``messages`` memo, a list of messages (and scalars) met a third time -- the same stored
        cells, as a ``_DeltaSnapshot`` seed is in the history of every checkpoint after it, from the
        archive's part cache -- is handed out as fresh copies of the elements decoded the second time
        (kept, never handed out), not decoded again cell by cell; a list holding anything else is
        decoded each time."""
        memo, key = self.messages, ("items", id(cells))
        again = memo is not None and _met(memo, cells) and key in memo
        seen: list[Any] | None = memo[key] if memo is not None and again else None
        if seen is not None:
            return [V.fresh_copy(v) if isinstance(v, BaseMessage) else v for v in seen]
        if all(type(c) is list for c in cells):
            return self.loads_many(cells)
        decode = self.decode
        if memo is None:
            return [decode(c, depth) for c in cells]
        # a message cell met before (``_held``) copied here, not through ``decode`` and ``_message``: a
        # turn's ``get_tuple`` meets every message of the thread again, in a list it has not met
        out = [V.fresh_copy(m) if (m := _held(memo, c)) is not None else decode(c, depth) for c in cells]
        # first met: only marked (a listing meets most lists once: a copy kept would be wasted);
        # met again: a copy of each element kept, which later meetings copy
        held = None
        if again and all(type(v) in _SHARED or isinstance(v, BaseMessage) for v in out):
            held = [_private(memo, c, v) for c, v in zip(cells, out, strict=True)]
        if len(memo) >= 2 * self.MESSAGES_LIMIT:
            memo.clear()
        _enter(memo, key, cells, held)
        return out


_SHARED = frozenset((str, int, float, bool, type(None)))
"""Immutable elements: a memo's list shares them with every copy it hands out."""
_KEPT = "kept"
"""The key, in a ``messages`` memo, of the objects its entries by identity were made for (``id`` ->
the cell or list), kept alive so that their ids are never another's: one map, not a ``(object, value)``
pair an entry (a listing meets thousands of cells once each, and every pair was one more object to
track for the gc: 7,500 of the 21,000 a fresh saver kept after a 1,002-checkpoint ``list()``)."""


def _enter(memo: dict[Any, Any], key: Any, obj: Any, value: Any) -> None:
    """Enter ``value`` in ``memo`` under ``key`` (``id(obj)``, or a tuple naming it), found again while
    ``obj`` is alive there (``_met``)."""
    memo[key] = value
    memo.setdefault(_KEPT, {})[id(obj)] = obj


def _private(memo: dict[Any, Any], cell: Any, value: Any) -> Any:
    """What a memo's list keeps of an element it hands out copies of: the message the memo keeps for
    that cell (never handed out either: one private copy a message, not one more a list), else a copy."""
    if not isinstance(value, BaseMessage):
        return value
    held = _held(memo, cell)
    return V.fresh_copy(value) if held is None else held


def _held(memo: dict[Any, Any], cell: Any) -> BaseMessage | None:
    """The message a memo keeps for this very message cell, met before (``SerdeCodec._message``), or
    None. The states a read builds share their unchanged cells (a replay copies a list, not its
    elements): a cell met again is found by identity, kept alive (``_KEPT``) so its id is never
    another's, and is not serialised again to find it by its text; only ``_message`` enters a memo
    under a cell's id, and a stored cell never changes, so it is the message ``decode`` would give."""
    key = id(cell)
    return memo.get(key) if memo.get(_KEPT, {}).get(key) is cell else None


def _met(memo: dict[Any, Any], obj: Any) -> bool:
    """Did this memo make an entry for this very object (not one that had its id before)?"""
    return memo.get(_KEPT, {}).get(id(obj)) is obj


def cell_text(cell: dict[str, Any]) -> bytes:
    """The JSON text a message cell is known by in a ``messages`` memo (``SerdeCodec._message``)."""
    return orjson.dumps(cell)


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


def _json_copy(value: Any) -> Any:
    """A private JSON copy of ``value``, or None when JSON does not hold it exactly."""
    try:
        return json_copy(value)
    except CheckpointError:
        return None


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
    seeds: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The archive state of a LangGraph checkpoint, reusing ``parent``'s (an archive state) entries.

    ``seeds``: the newest ``DeltaChannel`` snapshot entry known of each channel of the thread
    (``is_seed``), the old entry of a channel the parent holds none of: a ``DeltaChannel`` stores no
    value between its snapshots, and its next snapshot holds the messages of the last one first, so
    those are checked against their cells (in one pass when this saver put them: ``held``) and only
    the new ones are made cells, not every message of the thread again. Only a prior: every element
    is still checked by value, so a seed of another branch, or one changed since, costs a check."""
    skeleton = {k: v for k, v in checkpoint.items() if k != "channel_values"}
    values: dict[str, Any] = checkpoint.get("channel_values") or {}
    old_channels: dict[str, Any] = (parent or {}).get("channels", {})
    old_versions: dict[str, Any] = (parent or {}).get("checkpoint", {}).get("channel_versions", {})
    channels: dict[str, Any] = {}
    for name, version in (checkpoint.get("channel_versions") or {}).items():
        old = old_channels.get(name)
        prior = old  # what an encoded value starts from
        if old is None and seeds and V.is_delta_snapshot(values.get(name)):
            prior = seeds.get(name)
        if name in new_versions:
            if name in values:
                channels[name] = codec.encode_channel(values[name], prior)
        elif name in old_versions and _is_json(version) and old_versions[name] == version:
            if old is not None:  # unchanged: the parent's entry (or its absence) verbatim
                channels[name] = old
        elif name in values:
            channels[name] = codec.encode_channel(values[name], prior)
    state: dict[str, Any] = {"channels": channels}
    copied = _json_copy(skeleton)  # a private copy: LangGraph's dicts may change after the put
    if copied is not None:
        state["checkpoint"] = copied
    else:
        state["checkpoint_typed"] = codec.dumps(skeleton)
    if metadata_typed:
        state["metadata_typed"] = metadata_typed
    return state


def is_seed(entry: Any) -> bool:
    """Is a stored channel entry a ``DeltaChannel`` snapshot (``{"snapshot": <cell>}``)?"""
    return type(entry) is dict and len(entry) == 1 and V.SNAPSHOT in entry


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
        skeleton = stored_copy(state["checkpoint"], "stored LangGraph checkpoint")
    skeleton["channel_values"] = {name: codec.decode_channel(e) for name, e in state.get("channels", {}).items()}
    return skeleton


def restore_metadata(
    codec: SerdeCodec, record_metadata: dict[str, Any], state: dict[str, Any] | None
) -> dict[str, Any]:
    out = {k: v for k, v in record_metadata.items() if k != LG_KEY}
    for key, blob in ((state or {}).get("metadata_typed") or {}).items():
        out[key] = codec.loads(blob)
    return out
