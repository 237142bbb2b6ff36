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
import marshal
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


Texts = dict[int, tuple[Any, bytes]]
"""id of a ``json`` cell -> (that cell, the canonical text of its value): what a saver keeps from put to
put, so an unchanged list element is compared with its prior cell without serialising the prior."""
TEXTS_KEPT = 20_000
_STRICT = (
    orjson.OPT_SORT_KEYS
    | orjson.OPT_PASSTHROUGH_SUBCLASS
    | orjson.OPT_PASSTHROUGH_DATACLASS
    | orjson.OPT_PASSTHROUGH_DATETIME
)
"""``dumps`` refusing what it would otherwise write as if it were JSON: subclasses of str/int/dict/list
(an ``IntEnum``, an ``OrderedDict``), dataclasses, datetimes (no ``default``: each is a TypeError)."""


def same_json(value: Any, known: Any, text: bytes) -> bool:
    """Is ``value`` exactly the JSON value ``known`` (canonical text ``text``)? Its strict text is
    ``text`` (which rules out every type orjson refuses or passes through, and tells 1, 1.0 and true
    apart), and it is ``==`` to ``known`` (which rules out what orjson writes like JSON but is not: a
    tuple is not a list, a UUID or an Enum is not its value, NaN is not null): one C-speed pass each,
    where ``exact`` walks the value in Python. orjson writes an ``IntEnum``/``StrEnum`` as its value and
    ``==`` holds it equal to that value, so a third C-speed pass, ``marshal.dumps`` (which serialises
    builtin types only, subclasses refused; it runs no code), rules out every subclass of a JSON type."""
    try:
        if orjson.dumps(value, option=_STRICT) != text or not bool(known == value):
            return False
        marshal.dumps(value)
        return True
    except Exception:  # refused by orjson, or an ``__eq__`` that raises: not known to be the same
        return False


def plain_cell(value: Any, prior: Any, texts: Texts | None = None) -> Any:
    """The cell of a plain JSON value (``exact``), or None; ``prior`` itself when ``value`` is its JSON
    value exactly (``same_json``, with the prior's text from ``texts`` when the saver kept it)."""
    t = type(value)
    if t is str or t is int or t is float or t is bool:
        if not exact(value) or (t is str and dumps(value) is None):
            return None
        return value
    if prior is not None and type(prior) is dict and prior.keys() == {JSON}:
        held = None if texts is None else texts.get(id(prior))
        text = held[1] if held is not None and held[0] is prior else dumps(prior[JSON])
        if text is not None and same_json(value, prior[JSON], text):
            if held is None:
                _keep_text(texts, prior, text)
            return prior
    if not exact(value) or (raw := dumps(value)) is None:
        return None
    cell = {JSON: orjson.loads(raw)}
    _keep_text(texts, cell, raw)
    return cell


def _keep_text(texts: Texts | None, cell: Any, text: bytes) -> None:
    if texts is not None:
        if len(texts) >= TEXTS_KEPT:
            texts.clear()
        texts[id(cell)] = (cell, text)


def decode_message(cell: dict[str, Any], where: str, *, private: bool = True) -> BaseMessage:
    """The message a stored cell holds: a class of ``MESSAGES`` by ``type``, validated by pydantic.
    ``private``: validated from a copy of the cell (states are cached; pydantic keeps nested values
    as given); False for a message that is never handed out, only copied (``fresh_copy``), whose
    parts may then be the cell's: neither is ever changed."""
    typ = cell.get("type")
    cls = MESSAGES.get(typ) if type(typ) is str else None
    if cls is None:
        raise UnreadableValue(
            f"stored LangGraph value{where} is a message of type {str(typ)[:40]!r}, which ckpt_archive does not "
            f"construct (it builds {', '.join(sorted(MESSAGES))}); delete the checkpoint or read it as data"
        )
    try:
        return cls.model_validate(orjson.loads(orjson.dumps(cell)) if private else cell)
    except Exception as exc:
        first = (str(exc).strip().splitlines() or [""])[0][:120]
        raise UnreadableValue(
            f"stored LangGraph message{where} of type {typ!r} is refused by {cls.__name__} "
            f"({type(exc).__name__}: {first}); delete the checkpoint"
        ) from None


def fresh_copy(message: BaseMessage) -> BaseMessage:
    """A message equal to ``message`` sharing no mutable part with it (its lists and dicts copied as the
    JSON they were decoded from): built as pydantic's own ``__copy__`` builds one (a new instance, its
    field dict, extras, fields set and private attributes set on it), with each field copied once, no
    shallow copy first: a third of the cost of ``model_copy`` and a fifth of validating the cell again
    (a listed history hands out ~n^2/2 of them)."""
    cls = type(message)
    out = cls.__new__(cls)
    _set(out, "__dict__", _fresh(message.__dict__))
    extra = message.__pydantic_extra__
    _set(out, "__pydantic_extra__", None if extra is None else _fresh(extra) if extra else {})
    _set(out, "__pydantic_fields_set__", set(message.__pydantic_fields_set__))
    private = getattr(message, "__pydantic_private__", None)
    _set(out, "__pydantic_private__", None if private is None else copy.deepcopy(private))
    return out


_set = object.__setattr__
_ATOMS = frozenset((str, int, float, bool, type(None)))


def _fresh(fields: dict[str, Any]) -> dict[str, Any]:
    """``fields`` with each value sharing no mutable part with the original (immutable ones shared): a
    copy of the dict (one C call), then each value that is not an atom replaced by its copy."""
    out = fields.copy()
    for key, value in fields.items():
        t = type(value)
        if t in _ATOMS:
            continue
        if t is dict or t is list:
            out[key] = _copied(value) if value else t()
        else:
            out[key] = copy.deepcopy(value)
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


# -- reading stored states as a user does (the offline reader: analysis, CLI) ----------------------------
BOOKKEEPING_KEYS = frozenset(("checkpoint", "checkpoint_typed", "metadata_typed", "writes", "folded"))
"""Members of a stored LangGraph state (spec.md section 11) that are LangGraph's or the saver's
bookkeeping (channel versions, versions seen, ids, carried pending writes, folded history), not values."""


def is_bookkeeping(channel: str) -> bool:
    """Is ``channel`` one of LangGraph's own channels (``__start__``, ``__pregel_*``, ``branch:to:<node>``,
    ``start:<node>``...) rather than a field of the graph's state? ``__root__`` (a graph whose state is one
    value) is the user's."""
    if channel == "__root__":
        return False
    return channel.startswith(("branch:", "start:", "__pregel_")) or (
        channel.startswith("__") and channel.endswith("__")
    )


def is_state(state: Any) -> bool:
    """Is ``state`` (a stored archive state) one the LangGraph saver wrote (spec.md section 11)?"""
    return (
        type(state) is dict
        and type(state.get("channels")) is dict
        and ("checkpoint" in state or "checkpoint_typed" in state)
    )


def readable_cell(cell: Any, depth: int = 0) -> Any:
    """A stored cell as plain JSON a person reads, constructing nothing: a message stays its JSON object
    (``type``, ``content``, ``tool_calls``...), tags are unwrapped (``json``: the value; ``items``: a list;
    ``dict``: a dict; ``snapshot``: its value), and a serde pair is ``{"$serde": type, "bytes": n}`` (the
    archive cannot see inside it). Malformed cells are ``CheckpointError``, as for ``decode``."""
    if type(cell) is list:
        if len(cell) == 2 and type(cell[0]) is str and type(cell[1]) is str:
            return {"$serde": cell[0], "bytes": len(cell[1]) * 3 // 4}
        raise CheckpointError(f"stored LangGraph value is malformed: {str(cell)[:100]}; delete the checkpoint")
    if type(cell) is not dict:
        return cell
    if depth > MAX_NESTING:
        raise CheckpointError(f"stored LangGraph value nests more than {MAX_NESTING} containers; delete the checkpoint")
    tag = tag_of(cell, "")
    if tag is None:
        return cell  # a message: its stored JSON is what a person reads
    inner = cell[tag]
    if tag == JSON:
        return inner
    if tag == ITEMS and type(inner) is list:
        return [readable_cell(c, depth + 1) for c in inner]
    if tag == DICT and type(inner) is dict:
        return {k: readable_cell(c, depth + 1) for k, c in inner.items()}
    if tag == SNAPSHOT:
        return readable_cell(inner, depth + 1)
    raise CheckpointError(f"stored LangGraph value is malformed: {str(cell)[:100]}; delete the checkpoint")


def readable(state: dict[str, Any]) -> dict[str, Any]:
    """The graph's state as its user reads it: ``{channel: readable value}`` for the channels that hold
    a value and are not LangGraph's bookkeeping (``is_bookkeeping``), with none of the state's
    bookkeeping members (``BOOKKEEPING_KEYS``). Pure: no serde, no message class is constructed, so it
    reads an archive whoever wrote it. A ``DeltaChannel`` between its snapshots holds no value here."""
    channels = state.get("channels")
    if type(channels) is not dict:
        return {}
    return {name: readable_cell(cell) for name, cell in sorted(channels.items()) if not is_bookkeeping(name)}


# -- DeltaChannel values rebuilt offline (spec.md section 11: a channel with a version and no stored value) --
def replayed(state: dict[str, Any]) -> list[str]:
    """The user channels of a stored LangGraph state that LangGraph rebuilds from its ancestors' writes:
    a version in ``channel_versions`` and no stored value (a ``DeltaChannel`` between its snapshots), as
    LangGraph's ``_delta_channels_to_replay`` picks them. ``[]`` for a state whose bookkeeping is not JSON."""
    ck, channels = state.get("checkpoint"), state.get("channels")
    versions = ck.get("channel_versions") if type(ck) is dict else None
    if type(versions) is not dict or type(channels) is not dict:
        return []
    return sorted(str(k) for k in versions if not is_bookkeeping(str(k)) and k not in channels)


def rebuilt(cell: Any, depth: int = 0) -> Any:
    """A stored cell as message-like data LangGraph's messages reducer takes: a message cell rebuilt
    (``decode_message``: only ``MESSAGES``, validated), a list of them, strings and plain JSON as they are
    (the reducer coerces dicts and strings); ``None`` when the cell is a serde pair (only the serde reads
    it: the offline reader runs none) or not message-like."""
    if depth > MAX_NESTING or type(cell) is list:
        return None
    if type(cell) is not dict:
        return cell if type(cell) is str else None
    tag = tag_of(cell, "")
    if tag is None:
        return decode_message(cell, "")
    inner = cell[tag]
    if tag == JSON:
        return inner if type(inner) in (list, dict, str) else None
    if tag == SNAPSHOT:
        return rebuilt(inner, depth + 1)
    if tag == ITEMS and type(inner) is list:
        items = [rebuilt(c, depth + 1) for c in inner]
        return None if any(i is None for i in items) else items
    return None


def seed_messages(cell: Any) -> list[BaseMessage] | None:
    """A message channel's stored value (a list or a ``_DeltaSnapshot`` cell) as messages, or None."""
    value = rebuilt(cell)
    return value if type(value) is list and all(isinstance(m, BaseMessage) for m in value) else None


def fold_messages(base: list[BaseMessage], writes: list[Any]) -> list[BaseMessage] | None:
    """A message channel's value after the write cells ``writes`` (oldest first) on ``base``, by
    LangGraph's own ``_messages_delta_reducer`` (append, replace by id, ``RemoveMessage``,
    ``REMOVE_ALL_MESSAGES``), as ``get_state(config).values`` rebuilds a ``DeltaChannel``. ``None`` when
    a cell holds no message-like data (a serde pair, a number...) or the reducer refuses it."""
    from langgraph.graph.message import _messages_delta_reducer

    batch = [rebuilt(w) for w in writes]
    if any(b is None for b in batch):
        return None
    if not batch:
        return base
    try:
        folded: list[Any] = _messages_delta_reducer(list[Any](base), batch)
    except Exception:  # the reducer refused data that is not messages: no conversation to show
        return None
    return folded if all(isinstance(m, BaseMessage) for m in folded) else None


def readable_message(message: BaseMessage) -> dict[str, Any]:
    """A message as its stored JSON reads (``readable_cell`` of its cell): its short dump and ``type``."""
    return _short(message)
