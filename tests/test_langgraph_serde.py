"""ArchiveSaver never runs code named by stored data (issue 14, item 1).

A stored LangGraph value is ``[type, base64]``; its msgpack bytes may carry an "ext" that names a
callable and its arguments, which LangGraph's permissive ``JsonPlusSerializer`` imports and calls.
Each payload below names something observable (it creates a marker file when called); each is
delivered three ways a writer of the archive can: the saver's own put path with a crafted serde, the
archive's ``update_state``, and an edit of a stored object's bytes. A fresh ``ArchiveSaver`` with
``LANGGRAPH_STRICT_MSGPACK`` unset then reads it: the marker must not exist.
"""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import json
import os
import pickle
import shlex
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, TypedDict

import pytest

pytest.importorskip("langgraph")

import ormsgpack
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.conformance.test_utils import generate_checkpoint, generate_metadata
from langgraph.checkpoint.serde import _msgpack as lg_msgpack
from langgraph.checkpoint.serde.encrypted import EncryptedSerializer
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from langgraph.graph import START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.types import Command, Send, interrupt
from pydantic import BaseModel

import ckpt_archive as ca
from ckpt_archive.codec import compress
from ckpt_archive.format.manifest import seal, unseal
from ckpt_archive.integrations.langgraph import (
    ArchiveSaver,
    InvalidAllowedType,
    UnreadableValue,
    UnsafeSerde,
    UnsafeValue,
    strict_serde,
)

PAYLOAD = "PAYLOAD"  # the crafted serde writes the attack in place of this value


@dataclasses.dataclass
class Tripwire:
    """A user type whose construction is observable: it creates the file it names."""

    path: str

    def __post_init__(self) -> None:
        Path(self.path).write_text("constructed")


def _ext(code: int, *fields: Any) -> bytes:
    return ormsgpack.packb(ormsgpack.Ext(code, ormsgpack.packb(fields)))


class _Reduce:
    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[Any, ...]:
        return (os.system, (f"touch {shlex.quote(str(self.marker))}",))


def _payloads(marker: Path) -> dict[str, tuple[str, bytes]]:
    """Stored values that call something when decoded by a permissive serde: name -> (type, bytes)."""
    m, touch = str(marker), f"touch {shlex.quote(str(marker))}"
    mod = Tripwire.__module__
    lc2 = {"lc": 2, "type": "constructor", "id": ["os", "system"], "args": [touch]}
    return {
        "os.system": ("msgpack", _ext(0, "os", "system", touch)),
        "builtins.open": ("msgpack", _ext(1, "builtins", "open", [m, "w"])),
        "dataclass": ("msgpack", _ext(2, mod, "Tripwire", {"path": m})),
        "method": ("msgpack", _ext(3, "os", "system", touch, "__call__")),
        "pydantic_v1": ("msgpack", _ext(4, mod, "Tripwire", {"path": m})),
        "pydantic_v2": ("msgpack", _ext(5, mod, "Tripwire", {"path": m}, "model_validate_json")),
        "nested": ("msgpack", ormsgpack.packb({"ok": [1, ormsgpack.Ext(0, ormsgpack.packb(("os", "system", touch)))]})),
        "json_lc2": ("json", json.dumps(lc2).encode()),
        "pickle": ("pickle", pickle.dumps(_Reduce(marker))),
    }


@pytest.fixture(autouse=True)
def permissive_langgraph(monkeypatch: pytest.MonkeyPatch) -> None:
    """LangGraph's own default: ``LANGGRAPH_STRICT_MSGPACK`` unset (it is read when langgraph is imported)."""
    monkeypatch.delenv("LANGGRAPH_STRICT_MSGPACK", raising=False)
    monkeypatch.setattr(lg_msgpack, "STRICT_MSGPACK_ENABLED", False)


def _config(thread: str = "t") -> RunnableConfig:
    return {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}


def _put(saver: ArchiveSaver, value: Any) -> RunnableConfig:
    """One checkpoint whose channel ``x`` and list channel ``msgs`` hold ``value``, and a pending write of it."""
    cp = generate_checkpoint(channel_values={"x": value, "msgs": ["hello", value]})
    cp["channel_versions"] = {"x": 1, "msgs": 1}
    cfg = saver.put(_config(), cp, generate_metadata(step=0), {"x": 1, "msgs": 1})
    saver.put_writes(cfg, [("x", value)], "task-1")
    return cfg


def _read(url: str, **kw: Any) -> list[Any]:
    """Everything a fresh saver hands back for the thread: the channel values and the pending writes."""
    saver = ArchiveSaver.from_url(url, **kw)
    tup = saver.get_tuple(_config())
    assert tup is not None
    listed = list(saver.list(_config()))
    return [tup.checkpoint["channel_values"], tup.pending_writes, [t.checkpoint["channel_values"] for t in listed]]


class _Crafted(JsonPlusSerializer):
    """The attacker's writer: an ordinary serde, except that ``PAYLOAD`` is stored as the attack."""

    def __init__(self, blob: tuple[str, bytes]) -> None:
        super().__init__(allowed_msgpack_modules=None)
        self.blob = blob

    def dumps_typed(self, obj: Any) -> tuple[str, bytes]:
        return self.blob if obj == PAYLOAD else super().dumps_typed(obj)


def _via_put(url: str, blob: tuple[str, bytes]) -> None:
    _put(ArchiveSaver.from_url(url, serde=_Crafted(blob)), PAYLOAD)


def _via_update_state(url: str, blob: tuple[str, bytes]) -> None:
    """The archive's own edit API, given a state whose channel holds the crafted blob."""
    _put(ArchiveSaver.from_url(url), "benign")
    archive = ca.open_archive(url)
    info = archive.list("t")[-1]
    state = archive.load_by_id(info.checkpoint_id).state  # type: ignore[union-attr]
    stored = [blob[0], base64.b64encode(blob[1]).decode()]
    state["channels"]["x"] = stored
    state["channels"]["msgs"]["items"][1] = stored
    archive.update_state(info.checkpoint_id, state, info.version)
    _edit_writes(url, stored)


def _edit_writes(url: str, stored: list[str]) -> None:
    """Rewrite the pending-writes object's bytes (sealing is a checksum, not a signature)."""
    saver = ArchiveSaver.from_url(url)
    (key,) = asyncio.run(saver.store.find("_langgraph"))
    doc = unseal(asyncio.run(saver.store.get(key)), "writes", kind="langgraph writes")
    doc["writes"][0][2] = stored
    asyncio.run(saver.store.put(key, compress(seal(doc))))


def _via_stored_bytes(url: str, blob: tuple[str, bytes]) -> None:
    _put(ArchiveSaver.from_url(url), "benign")
    _edit_writes(url, [blob[0], base64.b64encode(blob[1]).decode()])


ROUTES: dict[str, Callable[[str, tuple[str, bytes]], None]] = {
    "put": _via_put,
    "update_state": _via_update_state,
    "stored_bytes": _via_stored_bytes,
}
CONSTRUCTORS = [n for n in _payloads(Path("m")) if n != "pickle"]


@pytest.mark.parametrize("route", ROUTES)
@pytest.mark.parametrize("payload", CONSTRUCTORS)
def test_a_stored_constructor_is_never_called_by_a_fresh_saver(route: str, payload: str, tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    url = str(tmp_path / "archive")
    ROUTES[route](url, _payloads(marker)[payload])
    got = _read(url)
    assert not marker.exists(), f"{payload} via {route} ran code on read"
    assert "pwned" in repr(got) or payload == "json_lc2"  # the payload is handed back as plain data


@pytest.mark.parametrize("route", ["update_state", "stored_bytes"])
def test_a_stored_pickle_is_refused_with_a_typed_error(route: str, tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    url = str(tmp_path / "archive")
    ROUTES[route](url, _payloads(marker)["pickle"])
    unpickling = JsonPlusSerializer(pickle_fallback=True, allowed_msgpack_modules=None)
    for serde in (None, unpickling):  # never unpickled, whatever the serde
        with pytest.raises(UnsafeValue, match="pickle"):
            _read(url, serde=serde)
    assert not marker.exists()
    assert issubclass(UnsafeValue, ca.CheckpointError)


def _refused(marker: Path) -> dict[str, tuple[str, bytes]]:
    """Stored values LangGraph's serde refuses with a plain ``ValueError`` (or ``RecursionError``)."""
    touch = f"touch {shlex.quote(str(marker))}"
    partner = {"lc": 1, "type": "constructor", "id": ["langchain_community", "llms", "openai", "OpenAI"], "kwargs": {}}
    jinja = "{{ cycler.__init__.__globals__.os.system(%r) }}" % touch  # noqa: UP031  # renders to a shell command
    template = {"template": jinja, "input_variables": [], "template_format": "jinja2"}
    prompt = {"lc": 1, "type": "constructor", "id": ["langchain", "prompts", "prompt", "PromptTemplate"]}
    deep = ormsgpack.packb(1)
    for _ in range(3000):  # LangGraph's delta-snapshot ext, nested: its hook recurses without a guard
        deep = ormsgpack.packb(ormsgpack.Ext(7, deep))
    return {
        "lc1_partner": ("json", json.dumps(partner).encode()),
        "lc1_os": ("json", json.dumps({**partner, "id": ["os", "system"], "kwargs": {"command": touch}}).encode()),
        "jinja2": ("json", json.dumps({**prompt, "kwargs": template}).encode()),
        "ext_3000": ("msgpack", deep),
        "json_100000": ("json", b"[" * 100_000 + b"]" * 100_000),
    }


@pytest.mark.parametrize("route", ["update_state", "stored_bytes"])
@pytest.mark.parametrize("payload", list(_refused(Path("m"))))
def test_a_stored_value_the_serde_refuses_is_a_typed_error(route: str, payload: str, tmp_path: Path) -> None:
    """Each read path (get_tuple, list, a graph's state history) raises ``UnreadableValue``, a
    ``CheckpointError``, on one line naming the thread and checkpoint, and nothing is run or rendered."""
    marker = tmp_path / "pwned"
    url = str(tmp_path / "archive")
    ROUTES[route](url, _refused(marker)[payload])
    saver = ArchiveSaver.from_url(url)
    reads: dict[str, Callable[[], Any]] = {
        "get_tuple": lambda: saver.get_tuple(_config()),
        "list": lambda: list(saver.list(_config())),
        "history": lambda: list(_graph(saver).get_state_history({"configurable": {"thread_id": "t"}})),
    }
    for name, read in reads.items():
        with pytest.raises(UnreadableValue) as caught:
            read()
        message = str(caught.value)
        assert "\n" not in message and "thread 't'" in message and "checkpoint '" in message, (name, message)
        assert "delete the checkpoint" in message, message
    assert issubclass(UnreadableValue, ca.CheckpointError)
    assert not marker.exists()


def test_a_pickling_serde_is_refused_at_put_before_anything_is_written(tmp_path: Path) -> None:
    url = str(tmp_path / "archive")
    saver = ArchiveSaver.from_url(url, serde=JsonPlusSerializer(pickle_fallback=True, allowed_msgpack_modules=None))
    with pytest.raises(UnsafeValue, match="pickle"):
        _put(saver, object())  # not msgpack-serialisable: the serde falls back to pickle
    assert saver.archive.list("t") == []


def test_registered_types_are_constructed_and_only_they(tmp_path: Path) -> None:
    """The positive control: the same payload, its type registered, is constructed."""
    marker = tmp_path / "pwned"
    url = str(tmp_path / "archive")
    _via_stored_bytes(url, _payloads(marker)["dataclass"])
    _read(url)
    assert not marker.exists()
    _read(url, allowed_types=[Tripwire])
    assert marker.exists()
    marker.unlink()
    _read(url, allowed_types=[(Tripwire.__module__, "Tripwire")])  # or by (module, name)
    assert marker.exists()
    marker.unlink()
    _read(url, allowed_types=[Profile])  # registering another type does not let this one in
    assert not marker.exists()
    with pytest.raises(InvalidAllowedType, match="module, name"):
        ArchiveSaver.from_url(url, allowed_types=[f"{Tripwire.__module__}.Tripwire"])  # type: ignore[list-item]


# -- graphs that checkpoint LangGraph's and the user's own types still round trip ----------------------
class Profile(BaseModel):
    name: str
    score: float


@dataclasses.dataclass
class Item:
    sku: str
    qty: int


class State(TypedDict, total=False):
    messages: Annotated[list[Any], add_messages]
    profile: Profile
    items: list[Item]
    sent: list[str]


def _graph(saver: ArchiveSaver) -> Any:
    def plan(state: State) -> Command[Any]:
        return Command(
            update={"profile": Profile(name="ada", score=1.5), "items": [Item("a", 1), Item("b", 2)]},
            goto=[Send("work", {"sku": "a"}), Send("work", {"sku": "b"})],
        )

    def work(arg: dict[str, Any]) -> dict[str, Any]:
        answer = interrupt(f"approve {arg['sku']}?")
        return {"messages": [AIMessage(f"{arg['sku']}: {answer}", id=f"ai-{arg['sku']}")]}

    builder = StateGraph(State)
    builder.add_node("plan", plan)
    builder.add_node("work", work)  # type: ignore[arg-type]  # a Send target: its input is the Send's arg
    builder.add_edge(START, "plan")
    return builder.compile(checkpointer=saver)


def test_a_graph_with_messages_send_interrupt_and_user_types_round_trips(tmp_path: Path) -> None:
    url = str(tmp_path / "archive")
    config = {"configurable": {"thread_id": "g"}}
    first = _graph(ArchiveSaver.from_url(url, allowed_types=[Profile, Item]))
    first.invoke({"messages": [HumanMessage("go", id="h0")]}, config)
    fresh = _graph(ArchiveSaver.from_url(url, allowed_types=[Profile, Item]))
    pending = fresh.get_state(config)
    assert {i.value for i in pending.interrupts} == {"approve a?", "approve b?"}  # Interrupt, from pending writes
    assert [t.name for t in pending.tasks] == ["work", "work"]  # the Sends
    assert pending.values["profile"] == Profile(name="ada", score=1.5)
    assert pending.values["items"] == [Item("a", 1), Item("b", 2)]
    resumed = fresh.invoke(Command(resume={i.id: "yes" for i in pending.interrupts}), config)
    assert [m.content for m in resumed["messages"]] == ["go", "a: yes", "b: yes"]
    assert isinstance(resumed["messages"][0], HumanMessage) and isinstance(resumed["messages"][1], AIMessage)
    # without registering them, the user's types come back as their plain data, never constructed
    plain = _graph(ArchiveSaver.from_url(url)).get_state(config).values
    assert plain["profile"] == {"name": "ada", "score": 1.5} and plain["items"][0] == {"sku": "a", "qty": 1}
    assert isinstance(plain["messages"][0], HumanMessage)


class _Reverse:
    """A stand-in cipher (the keyed one is in test_langgraph_saver.py): what matters is the envelope."""

    def encrypt(self, plaintext: bytes) -> tuple[str, bytes]:
        return "rev", plaintext[::-1]

    def decrypt(self, ciphername: str, ciphertext: bytes) -> bytes:
        return ciphertext[::-1]


def test_an_encrypting_serde_does_not_let_plaintext_constructors_in(tmp_path: Path) -> None:
    """``EncryptedSerializer`` decodes a value without a cipher suffix as plaintext, with its inner serde:
    whoever can write the archive needs no key. Its default inner serde constructs anything, so the saver
    refuses it unless told by name; with ``strict_serde()`` inside, the injected value stays data."""
    marker = tmp_path / "pwned"
    url = str(tmp_path / "archive")
    with pytest.raises(UnsafeSerde, match="strict_serde"):
        ArchiveSaver.from_url(url, serde=EncryptedSerializer(_Reverse()))
    with pytest.raises(UnsafeSerde, match="strict_serde"):
        ArchiveSaver.from_url(url, serde=JsonPlusSerializer())
    serde = EncryptedSerializer(_Reverse(), strict_serde())
    _put(ArchiveSaver.from_url(url, serde=serde), "benign")
    _edit_writes(url, ["msgpack", base64.b64encode(_payloads(marker)["os.system"][1]).decode()])
    saver = ArchiveSaver.from_url(url, serde=serde, allowed_types=[Item])  # extends the inner allowlist
    tup = saver.get_tuple(_config())
    assert tup is not None and tup.checkpoint["channel_values"]["x"] == "benign"
    assert not marker.exists()
    unsafe = ArchiveSaver.from_url(url, serde=EncryptedSerializer(_Reverse()), unsafe_any_type=True)
    unsafe.get_tuple(_config())  # the opt-in is real: LangGraph's permissive serde runs the payload
    assert marker.exists()
