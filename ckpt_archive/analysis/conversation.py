"""A thread as a conversation: the state a user reads, and its messages as rows.

A LangGraph thread's stored state is the saver's (spec.md section 11): ``checkpoint`` bookkeeping,
``channels`` of cells, carried pending writes. ``view`` turns it into what the graph's user reads
(``integrations/langgraph/values.readable``: the user's channels as plain JSON, LangGraph's own channels
and the saver's members left out), so "what changed" (``changes_frame``, ``ckpt-archive diff``) is about
the graph's fields, not ``branch:to:agent`` or ``versions_seen``. Any other state is its own view.

``message_row`` reads one message, a LangChain message's stored JSON (``type``, ``content``,
``tool_calls``, ``tool_call_id``, ``status``...) or a plain ``{"role", "content"}`` dict, into the
columns of ``MESSAGE_SCHEMA`` (``frames.messages_table``: every message of a checkpoint, in order).
Pure: no I/O, and nothing is constructed from what the archive holds.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from .. import codec
from ..model import Checkpoint

ROLES = {
    "human": "user",
    "ai": "assistant",
    "tool": "tool",
    "system": "system",
    "function": "function",
    "remove": "remove",
    "HumanMessageChunk": "user",
    "AIMessageChunk": "assistant",
    "ToolMessageChunk": "tool",
    "SystemMessageChunk": "system",
    "FunctionMessageChunk": "function",
}
"""The role of each LangChain message type (``chat``/``ChatMessageChunk`` carry their own ``role``)."""
TOOL_TYPES = frozenset(("tool", "ToolMessageChunk"))

MESSAGE_SCHEMA = pa.schema(
    [
        ("thread_id", pa.string()),
        ("checkpoint_id", pa.string()),
        ("step", pa.int64()),
        ("index", pa.int64()),
        ("id", pa.string()),
        ("type", pa.string()),
        ("role", pa.string()),
        ("name", pa.string()),
        ("text", pa.string()),
        ("tool_calls", pa.string()),
        ("tool_call_id", pa.string()),
        ("status", pa.string()),
    ]
)
"""Columns of ``messages_table``: ``type`` is LangChain's (null for a plain dict message), ``role``
user/assistant/tool/system/...; ``text`` the content's text (``text_of``: LangChain's ``message.text``);
``tool_calls`` the JSON list of an AI message's calls (``name``, ``args``, ``id``); ``tool_call_id``,
``name`` (the tool's) and ``status`` (``success`` unless stored ``error``) those of a tool result."""


def view(state: dict[str, Any]) -> dict[str, Any]:
    """The state as its user reads it: a LangGraph state's user channels as plain JSON (bookkeeping
    left out, ``values.readable``); any other state as it is."""
    if type(state.get("channels")) is not dict:
        return state
    try:
        from ..integrations.langgraph import values
    except ImportError:  # no langgraph extra: the stored form is all there is to show
        return state
    return values.readable(state) if values.is_state(state) else state


def text_of(content: Any) -> str:
    """The text of a message's content, as LangChain's ``message.text`` gives it: a string itself; of
    content blocks, the strings and the ``text`` of ``{"type": "text"}`` blocks, joined (images,
    reasoning and tool blocks are not text)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            block if isinstance(block, str) else block["text"]
            for block in content
            if isinstance(block, str)
            or (isinstance(block, dict) and block.get("type") == "text" and isinstance(block.get("text"), str))
        )
    return codec.dumps(content).decode()


def message_row(message: Any) -> dict[str, Any]:
    """One message as the columns of ``MESSAGE_SCHEMA`` (without thread, checkpoint, step, index)."""
    if not isinstance(message, dict):
        return {"id": None, "type": None, "role": None, "name": None, "text": text_of(message)} | _no_tool()
    typ = message.get("type") if isinstance(message.get("type"), str) else None
    role = ROLES.get(typ) if typ is not None else None
    if role is None:
        role = message.get("role") if isinstance(message.get("role"), str) else typ
    calls = message.get("tool_calls")
    is_tool = typ in TOOL_TYPES or (typ is None and role == "tool")
    status = message.get("status")
    if is_tool and status is None and typ is not None:
        status = "success"  # LangChain's default, absent from the stored JSON (a field at its default)
    name = message.get("name") if message.get("name") is not None else message.get("tool")
    return {
        "id": _str_or_none(message.get("id")),
        "type": typ,
        "role": _str_or_none(role),
        "name": _str_or_none(name),
        "text": text_of(message.get("content")),
        "tool_calls": codec.dumps(calls).decode() if calls else None,
        "tool_call_id": _str_or_none(message.get("tool_call_id")),
        "status": _str_or_none(status),
    }


def _no_tool() -> dict[str, Any]:
    return {"tool_calls": None, "tool_call_id": None, "status": None}


def _str_or_none(value: Any) -> str | None:
    return None if value is None else value if isinstance(value, str) else codec.dumps(value).decode()


def messages_of(ckpt: Checkpoint, channel: str = "messages", shown: dict[str, Any] | None = None) -> list[Any]:
    """The messages of a checkpoint: its ``channel`` (a LangGraph channel, or a state key) in its
    readable state ``shown`` (default ``view(ckpt.state)``) when it is a list, else the checkpoint's own
    message list."""
    found = (view(ckpt.state) if shown is None else shown).get(channel)
    return found if isinstance(found, list) else list(ckpt.messages)
