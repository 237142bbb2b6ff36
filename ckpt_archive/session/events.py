"""What a session records: its events (a small tagged union), its status and its run state.

All are frozen pydantic models that serialise to plain JSON (``event_to_doc``/``event_from_doc``),
so an event log can be stored anywhere and read back by any process.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    TypeAdapter,
    ValidationError,
    ValidationInfo,
)

from ..codec import check_json
from ..errors import CheckpointError, InvalidState


def _json_value(value: Any, info: ValidationInfo) -> Any:
    check_json(value, info.field_name or "value")
    return value


JSON = Annotated[Any, AfterValidator(_json_value)]
"""Any JSON value; anything else is refused with InvalidState naming the field and the path."""


class SessionStatus(StrEnum):
    QUEUED = "queued"
    RUNNING = "running"
    WAITING_FOR_TOOL = "waiting-for-tool"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"


class _Value(BaseModel):
    """Frozen, no extra fields, and our typed error (not pydantic's wrapper) for bad input."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    def __init__(self, **data: Any) -> None:
        try:
            super().__init__(**data)
        except ValidationError as exc:
            for err in exc.errors():
                original = (err.get("ctx") or {}).get("error")
                if isinstance(original, CheckpointError):
                    raise original from None
            raise InvalidState(f"invalid {type(self).__name__}: {_first_error(exc)}") from None


def _first_error(exc: ValidationError) -> str:
    err = exc.errors()[0]
    return f"{'.'.join(str(p) for p in err['loc']) or 'value'}: {err['msg']}"


class StatusChanged(_Value):
    """The session moved to another status."""

    type: Literal["status"] = "status"
    status: SessionStatus
    reason: str | None = None


class MessageEvent(_Value):
    """A message of the conversation (any JSON content)."""

    type: Literal["message"] = "message"
    role: str
    content: JSON = None


class ToolCall(_Value):
    """The agent asked for a tool; its result arrives later as a ToolResult with the same id."""

    type: Literal["tool_call"] = "tool_call"
    tool_call_id: str
    name: str
    arguments: Annotated[dict[str, Any], AfterValidator(_json_value)] = Field(default_factory=dict)


class ToolResult(_Value):
    type: Literal["tool_result"] = "tool_result"
    tool_call_id: str
    output: JSON = None
    is_error: bool = False


SessionEvent = Annotated[StatusChanged | MessageEvent | ToolCall | ToolResult, Field(discriminator="type")]
"""One entry of a session's event log, tagged by ``type``."""

EVENT_TYPES = (StatusChanged, MessageEvent, ToolCall, ToolResult)
_event_adapter: TypeAdapter[SessionEvent] = TypeAdapter(SessionEvent)


class RunState(_Value):
    """Where a run stands: how far it got, which tool calls it waits for, its status."""

    seq: int = Field(default=0, ge=0)
    pending_tool_ids: tuple[str, ...] = ()
    status: SessionStatus = SessionStatus.QUEUED


def event_to_doc(event: Any) -> dict[str, Any]:
    """The JSON document of an event; InvalidState for anything that is not a valid SessionEvent."""
    if not isinstance(event, EVENT_TYPES):
        raise InvalidState(f"event must be one of {[t.__name__ for t in EVENT_TYPES]}, got {type(event).__name__}")
    doc = event.model_dump(mode="python")  # StrEnum members are str: checked as JSON strings
    check_json(doc, f"{type(event).__name__}")
    return event.model_dump(mode="json")


def event_from_doc(doc: Any, where: str = "event") -> SessionEvent:
    try:
        return _event_adapter.validate_python(doc)
    except ValidationError as exc:
        raise InvalidState(f"{where} is not a valid SessionEvent: {_first_error(exc)}") from None


def check_run_state(run_state: Any) -> RunState:
    if not isinstance(run_state, RunState):
        raise InvalidState(f"run_state must be a RunState, got {type(run_state).__name__}")
    return run_state


def run_state_from_doc(doc: Any, where: str = "run state") -> RunState:
    try:
        return RunState.model_validate(doc)
    except ValidationError as exc:
        raise InvalidState(f"{where} is not a valid RunState: {_first_error(exc)}") from None
