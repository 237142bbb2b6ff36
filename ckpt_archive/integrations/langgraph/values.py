"""Readable LangGraph values: LangChain messages and plain data stored as JSON, checked exact at save.

A value the saver stores (a channel's value, each element of a list channel, a pending write, a
``_DeltaSnapshot``'s value) is one **cell** (spec.md section 11)::

    "text" | 12 | 1.5 | true                   a str, int (64-bit), finite float or bool: itself
    {"json": <any JSON>}                      a JSON value (None, lists, dicts of JSON), verbatim
    {"items": [<cell>, ...]}                  a list, element by element
    {"dict": {<str key>: <cell>, ...}}        a dict with str keys holding a cell that is not plain JSON
    {"snapshot": <cell>}                      LangGraph's _DeltaSnapshot(value)
    {"type": "human" | "ai" | ..., <fields>}  a LangChain message (any other object: see MESSAGES)
    [<type>, <base64>]                        the serde's bytes (``dumps_typed``): everything else

A list or a one-key object tagged ``json``/``items``/``dict``/``snapshot`` is never anything else, so
a JSON value that looks like a serde pair or a message is stored under ``json`` and read back as data.
A message cell is ``message.model_dump(exclude_defaults=True)`` with its ``type`` (its full dump when
the short one does not rebuild it), and is stored only when the message rebuilt from that JSON is the
original exactly: same class, ``==``, and the same dump with the same types throughout
(``rebuilds``); a custom subclass, an artifact or metadata that is not JSON keeps the serde's bytes.
Plain values are stored as JSON only when every part is exactly a JSON type (``exact``: not a tuple,
set, bytes, datetime, enum, str subclass, non-str key, NaN or an int past 64 bits). Dict key order is
not kept (the archive's canonical JSON sorts keys, as for every state).

Reading builds a message only from ``MESSAGES``, by its ``type``, with pydantic's validation (no
msgpack, no import, no name the archive chooses); any other object cell, or fields the class refuses,
is ``UnreadableValue``.
"""

from __future__ import annotations

import copy
import math
from typing import Any

import orjson
from langchain_core.messages import (
    AIMessage,
    AIMessageChunk,
    BaseMessage,
    ChatMessage,
    ChatMessageChunk,
    FunctionMessage,
    FunctionMessageChunk,
    HumanMessage,
    HumanMessageChunk,
    RemoveMessage,
    SystemMessage,
    SystemMessageChunk,
    ToolMessage,
    ToolMessageChunk,
)
from langgraph.checkpoint.serde.types import _DeltaSnapshot

from ...errors import CheckpointError
from .serde import UnreadableValue

MESSAGES: dict[str, type[BaseMessage]] = {
    str(cls.model_fields["type"].default): cls
    for cls in (
        HumanMessage,
        AIMessage,
        ToolMessage,
        SystemMessage,
        FunctionMessage,
        ChatMessage,
        RemoveMessage,
        HumanMessageChunk,
        AIMessageChunk,
        ToolMessageChunk,
        SystemMessageChunk,
        FunctionMessageChunk,
        ChatMessageChunk,
    )
}
"""The only classes a stored message cell constructs, by its ``type`` (LangChain's own names)."""

JSON, ITEMS, DICT, SNAPSHOT = "json", "items", "dict", "snapshot"
TAGS = frozenset((JSON, ITEMS, DICT, SNAPSHOT))
MAX_NESTING = 32
"""Tagged containers (``items``/``dict``/``snapshot``) nested in one cell: a writer nests no deeper (a
deeper value is one ``json`` or serde cell), a reader refuses deeper."""
_LIMIT = 1 << 63


def exact(value: Any, depth: int = 0) -> bool:
    """Is ``value`` made of JSON types exactly, so that JSON gives it back equal and of the same types?"""
    t = type(value)
    if t is str or t is bool or value is None:
        return True
    if t is int:
        return bool(-_LIMIT <= value < _LIMIT)
    if t is float:
        return math.isfinite(value)
    if depth > 200:
        return False
    if t is list:
        return all(exact(v, depth + 1) for v in value)
    if t is dict:
        return all(type(k) is str and exact(v, depth + 1) for k, v in value.items())
    return False


def dumps(value: Any) -> bytes | None:
    """Canonical JSON text (sorted keys), or None when orjson refuses it (a lone surrogate, too deep)."""
    try:
        return orjson.dumps(value, option=orjson.OPT_SORT_KEYS)
    except (TypeError, orjson.JSONEncodeError):
        return None


def _short(message: BaseMessage) -> dict[str, Any]:
    return {**message.model_dump(exclude_defaults=True), "type": message.type}


def _full(message: BaseMessage) -> dict[str, Any]:
    return {**message.model_dump(), "type": message.type}


def rebuilds(message: BaseMessage, raw: bytes) -> bool:
    """Does the message cell whose text is ``raw`` rebuild ``message`` exactly?"""
    cls = type(message)
    try:
        rebuilt = cls.model_validate(orjson.loads(raw))
        return type(rebuilt) is cls and bool(rebuilt == message) and dumps(_short(rebuilt)) == dumps(_short(message))
    except Exception:  # pydantic or a validator refused what the message dumped: not exact
        return False


def message_cell(message: Any, prior: Any) -> Any:
    """The cell of a message (``prior`` when it is the same JSON), or None when JSON cannot hold it exactly."""
    cls = MESSAGES.get(getattr(message, "type", None))  # type: ignore[arg-type]
    if cls is None or type(message) is not cls:
        return None  # a subclass keeps its own class only through the serde
    for dump in (_short, _full):
        try:
            fields = dump(message)
        except Exception:
            return None
        if not exact(fields) or (raw := dumps(fields)) is None:
            return None
        if prior is not None and type(prior) is dict and dumps(prior) == raw:
            return prior  # checked when it was stored, and the same text now
        if rebuilds(message, raw):
            return orjson.loads(raw)  # a private copy: the caller's objects may change after the put
    return None


def plain_cell(value: Any, prior: Any) -> Any:
    """The cell of a plain JSON value (``exact``), or None."""
    t = type(value)
    if t is str or t is int or t is float or t is bool:
        if not exact(value) or (t is str and dumps(value) is None):
            return None
        return value
    if not exact(value) or (raw := dumps(value)) is None:
        return None
    if prior is not None and type(prior) is dict and prior.keys() == {JSON} and dumps(prior[JSON]) == raw:
        return prior
    return {JSON: orjson.loads(raw)}


def decode_message(cell: dict[str, Any], where: str) -> BaseMessage:
    """The message a stored cell holds: a class of ``MESSAGES`` by ``type``, validated by pydantic."""
    typ = cell.get("type")
    cls = MESSAGES.get(typ) if type(typ) is str else None
    if cls is None:
        raise UnreadableValue(
            f"stored LangGraph value{where} is a message of type {str(typ)[:40]!r}, which ckpt_archive does not "
            f"construct (it builds {', '.join(sorted(MESSAGES))}); delete the checkpoint or read it as data"
        )
    try:
        return cls.model_validate(orjson.loads(orjson.dumps(cell)))  # a private copy: states are cached
    except Exception as exc:
        first = (str(exc).strip().splitlines() or [""])[0][:120]
        raise UnreadableValue(
            f"stored LangGraph message{where} of type {typ!r} is refused by {cls.__name__} "
            f"({type(exc).__name__}: {first}); delete the checkpoint"
        ) from None


def fresh_copy(message: BaseMessage) -> BaseMessage:
    """A message equal to ``message`` sharing no mutable part with it (its lists and dicts copied as the
    JSON they were decoded from): a quarter of the cost of validating the cell again."""
    out = message.model_copy()
    for fields in (out.__dict__, out.__pydantic_extra__ or {}):
        for key, value in fields.items():
            if type(value) is dict or type(value) is list:
                fields[key] = _copied(value) if value else type(value)()
            elif value is not None and type(value) not in (str, int, float, bool):
                fields[key] = copy.deepcopy(value)
    return out


def _copied(value: Any) -> Any:
    try:
        return orjson.loads(orjson.dumps(value))
    except TypeError:  # not plain JSON after validation (a key that is not a string): copied as it is
        return copy.deepcopy(value)


def tag_of(cell: dict[str, Any], where: str) -> str | None:
    """The tag of a one-key tagged cell, None for a message cell; malformed cells are typed errors."""
    if len(cell) == 1:
        (key,) = cell
        if key in TAGS:
            return str(key)
    if "type" not in cell or TAGS & cell.keys():
        raise CheckpointError(f"stored LangGraph value{where} is malformed: {str(cell)[:100]}; delete the checkpoint")
    return None


def is_delta_snapshot(value: Any) -> bool:
    return type(value) is _DeltaSnapshot


def delta_snapshot(value: Any) -> Any:
    return _DeltaSnapshot(value)
