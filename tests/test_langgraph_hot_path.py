"""The LangGraph hot path: what one ``put`` and one ``get_tuple`` cost must not grow with the thread.

Counted, not timed: records turned into listing entries per ``get_tuple`` (it rebuilt one for every
record of the thread), PUTs per ``put``, and files created per ``put`` on local disk.
"""

from __future__ import annotations

import collections
import enum
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip("langgraph.checkpoint.conformance")

from langgraph.checkpoint.conformance.test_utils import generate_checkpoint, generate_metadata

import ckpt_archive as ca
from ckpt_archive.integrations.langgraph import ArchiveSaver
from ckpt_archive.integrations.langgraph import held as H
from ckpt_archive.integrations.langgraph import values as V
from ckpt_archive.integrations.langgraph.saver import SAVER_HINT_EVERY, SAVER_HINT_IDLE
from ckpt_archive.ops import reads as ops_reads
from ckpt_archive.storage import RoundTrips
from ckpt_archive.testing import S3Server


def _config(thread: str, checkpoint_id: str | None = None) -> dict[str, Any]:
    conf: dict[str, Any] = {"thread_id": thread, "checkpoint_ns": ""}
    if checkpoint_id:
        conf["checkpoint_id"] = checkpoint_id
    return {"configurable": conf}


def _grow(saver: ArchiveSaver, thread: str, n: int, parent: dict[str, Any] | None = None) -> dict[str, Any]:
    cfg = parent or _config(thread)
    for i in range(n):
        cp = generate_checkpoint(channel_values={"turn": i, "note": f"step {i}"})
        cp["channel_versions"] = {"turn": i + 1, "note": i + 1}
        cfg = saver.put(cfg, cp, generate_metadata(step=i), {"turn": i + 1, "note": i + 1})
    return cfg


class _Built:
    """Counts the records turned into ``CheckpointInfo`` (``record_info``) while it is installed."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.n = 0
        real = ops_reads.record_info

        def counting(thread_id: str, rec: Any) -> Any:
            self.n += 1
            return real(thread_id, rec)

        monkeypatch.setattr(ops_reads, "record_info", counting)  # every listing entry is built by it


@pytest.mark.parametrize("cold", [False, True])
def test_get_tuple_of_the_head_builds_records_independent_of_thread_length(
    monkeypatch: pytest.MonkeyPatch, cold: bool
) -> None:
    """``get_tuple`` of the latest checkpoint, and of the head named by its id, answers from the head
    after one probe of the log: it builds 1 record however long the thread (before: one per record)."""
    built: dict[int, list[int]] = {}
    for n in (10, 120):
        url = f"memory://lg-hot-get-{n}-{cold}"
        writer = ArchiveSaver.from_url(url)
        last = _grow(writer, "t", n)
        writer.put_writes(last, [("note", "pending")], "task-1", "p")
        counter = _Built(monkeypatch)
        counts = []
        for config in (_config("t"), last):
            saver = ArchiveSaver.from_url(url) if cold else writer
            counter.n = 0
            got = saver.get_tuple(config)
            assert got is not None and got.config == last and got.pending_writes == [("task-1", "note", "pending")]
            assert got.checkpoint["channel_values"] == {"turn": n - 1, "note": f"step {n - 1}"}
            counts.append(counter.n)
        built[n] = counts
        monkeypatch.undo()
    assert built[10] == built[120] and max(built[120]) <= 2, built


def _puts(log: list[tuple[str, str]], prefix: str) -> list[str]:
    return [path for kind, path in log if kind == "PUT" and path.startswith(prefix)]


def test_a_burst_of_puts_is_one_put_each_and_the_hint_follows_once_idle(s3_server: S3Server) -> None:
    """``from_url`` on S3 (moto, requests counted at the server): a plain put is its commit entry alone
    (before: commit + hint, 2 PUTs a put), the hint going with snapshots (``SAVER_HINT_EVERY`` is the
    snapshot interval); once the thread has had no put for ``hint_idle`` the writer puts the
    hint it left behind, once for the whole burst, so a cold ``get_tuple`` then reads the head and its
    pending writes in 3 round trips (2 without), as with a hint at every put."""
    url = s3_server.make_bucket("lg-hot-burst") + "/a"
    opts = s3_server.storage_options()
    saver = ArchiveSaver.from_url(url, opts, hint_idle=0.3)
    cfg = _grow(saver, "t", 1)  # the first put (creates the archive) and its snapshot
    time.sleep(0.6)
    per_put = []
    for i in range(1, 10):  # the plain puts between two snapshots (full_snapshot_interval=10)
        s3_server.reset_counts()  # the server is shared by the worker's other tests
        cp = generate_checkpoint(channel_values={"turn": i, "note": f"step {i}"})
        cp["channel_versions"] = {"turn": i + 1, "note": i + 1}
        cfg = saver.put(cfg, cp, generate_metadata(step=i), {"turn": i + 1, "note": i + 1})
        per_put.append(len(_puts(s3_server.log, "/lg-hot-burst/a/")))
    assert per_put == [1] * 9, per_put  # its commit entry: the hint goes with the snapshot (and once idle)
    s3_server.reset_counts()
    saver.put_writes(cfg, [("note", "pending")], "task-1", "p")
    assert len(_puts(s3_server.log, "/lg-hot-burst/a/")) == 1
    deadline = time.monotonic() + 10  # idle: the writer's timer puts the hint (polled: a loaded machine)
    while len(idle := _puts(s3_server.log, "/lg-hot-burst/a/")) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert len(idle) == 2 and idle[-1].endswith("/_head.json.zst"), idle
    trips = RoundTrips(ca.open_store(url, opts), latency=0.01)
    got = ArchiveSaver(ca.ArchiveCheckpointer(trips)).get_tuple(_config("t"))
    assert got is not None and got.config == cfg and got.pending_writes == [("task-1", "note", "pending")]
    assert trips.depth == 3 and trips.requests["list_dir"] == 1, trips.calls  # hint; probes, writes; task


def test_a_put_on_local_disk_writes_one_file(tmp_path: Path) -> None:
    """On local disk each object written is a temp file, an fsync and a link, in one executor job:
    ``from_url``'s policy (``SAVER_HINT_EVERY``, ``SAVER_HINT_IDLE``) writes one file per plain put in one
    job (before: 2 files in 2 jobs, commit and hint), counted at the store; the hint a burst left behind
    is one file once idle."""
    trips = RoundTrips(ca.open_store(str(tmp_path)))
    archive = ca.ArchiveCheckpointer(trips, hint_every=SAVER_HINT_EVERY, hint_idle=SAVER_HINT_IDLE)
    saver = ArchiveSaver(archive)
    cfg = _grow(saver, "t", 1)
    archive.flush_hints()
    files, jobs = [], []
    for i in range(1, 10):
        trips.reset()
        cp = generate_checkpoint(channel_values={"turn": i})
        cp["channel_versions"] = {"turn": i + 1}
        cfg = saver.put(cfg, cp, generate_metadata(step=i), {"turn": i + 1})
        files.append(trips.requests["put"] + trips.requests["create"])
        jobs.append(sum(trips.requests.values()))  # each request to a local store is one executor job
    assert files == [1] * 9, files
    assert jobs == files, (jobs, files)  # nothing read: the put's only job is writing its file(s)
    trips.reset()
    archive.flush_hints()  # what the idle timer does
    assert trips.requests["put"] == 1 and trips.calls[0][1].endswith("_head.json.zst"), trips.calls


class _Plain(enum.Enum):
    ONE = 1
    TEXT = "x"


class _Level(enum.IntEnum):
    ONE = 1


class _Name(str):
    pass


def _lookalikes(value: Any) -> st.SearchStrategy[Any]:
    """``value``, or a value orjson writes like it (or nearly) that JSON does not hold exactly."""
    options: list[Any] = [value]
    if type(value) is list:
        options += [tuple(value)]
    if type(value) is dict:
        options += [collections.OrderedDict(value)]
    if value is None:
        options += [float("nan"), uuid.UUID(int=0)]
    if type(value) is int and not isinstance(value, bool):
        options += [float(value), bool(value & 1), _Level.ONE if value == 1 else value]
        if value == 1:
            options += [_Plain.ONE]
    if type(value) is str:
        options += [_Name(value), _Plain.TEXT if value == "x" else value]
    return st.sampled_from(options)


def _twin(value: Any) -> st.SearchStrategy[Any]:
    if type(value) is list:
        inner = st.tuples(*(_twin(v) for v in value)).map(list) if value else st.just([])
        return inner.flatmap(_lookalikes)
    if type(value) is dict:
        keys = list(value)
        inner = st.tuples(*(_twin(value[k]) for k in keys)).map(lambda vs: dict(zip(keys, vs, strict=True)))
        return (inner if keys else st.just({})).flatmap(_lookalikes)
    return _lookalikes(value)


_leaves = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-3, 3),
    st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from(["x", "é", ""]),
)
_json = st.recursive(
    _leaves,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from(["a", "b"]), inner, max_size=2),
    max_leaves=8,
)


@settings(max_examples=300, deadline=None)
@given(_json.flatmap(lambda known: st.tuples(st.just(known), _twin(known))))
def test_a_list_element_keeps_its_prior_cell_only_when_json_holds_it_exactly(pair: tuple[Any, Any]) -> None:
    """``plain_cell`` keeps an element's prior cell on the fast test (``same_json``: one strict dump and
    one ``==``, not the Python walk of ``exact``) exactly when the full test would: the element is made
    of JSON types only and has the prior's canonical text. Lookalikes (a tuple for a list, an Enum, a
    str or int subclass, NaN or a UUID for null, 1.0 or True for 1) never pass."""
    known, value = pair
    text = V.dumps(known)
    assert text is not None
    exact = V.exact(value) and V.dumps(value) == text
    assert V.same_json(value, known, text) is exact
    prior = {V.JSON: known}
    cell = V.plain_cell(value, prior, {id(prior): (prior, text)})
    if type(value) in (str, int, float, bool):  # a plain scalar is its own cell
        assert cell is (value if V.exact(value) else None)
        return
    assert (cell is prior) is exact
    if cell is not None and cell is not prior:  # a new cell: the exact test decided
        assert V.exact(value) and V.dumps(cell[V.JSON]) == V.dumps(value)


def test_a_put_hands_its_encoded_state_over_without_a_second_check_and_copy(monkeypatch: pytest.MonkeyPatch) -> None:
    """The saver's state is made of cells it just encoded (checked exact when made, never mutated), so
    the archive serialises it once for its digest (``asave_owned``) instead of checking and privately
    copying it again (``codec.json_copy_raw``: before, twice a put, the state and its messages); what it
    stores reads back the same."""
    import ckpt_archive.codec as C

    calls = []
    real = C.json_copy_raw

    def counting(value: Any, where: str = "state", series: str | None = None) -> Any:
        if series is not None:  # the save's check and copy of a thread's state or messages (small values: none)
            calls.append(where)
        return real(value, where, series)

    saver = ArchiveSaver.from_url("memory://lg-hot-owned")
    cfg = _grow(saver, "t", 2)
    monkeypatch.setattr(C, "json_copy_raw", counting)
    cp = generate_checkpoint(channel_values={"turn": 9, "note": {"nested": [1, 2.5, "x", None, True]}})
    cp["channel_versions"] = {"turn": 10, "note": 10}
    cfg = saver.put(cfg, cp, generate_metadata(step=2), {"turn": 10, "note": 10})
    assert calls == [], calls
    monkeypatch.undo()
    got = ArchiveSaver.from_url("memory://lg-hot-owned").get_tuple(cfg)
    assert got is not None and got.checkpoint["channel_values"] == cp["channel_values"]
    assert got.checkpoint["channel_versions"] == cp["channel_versions"]


_EXIT_RIGHT_AFTER_PUT = """
import json, sys
from langgraph.checkpoint.conformance.test_utils import generate_checkpoint, generate_metadata
from ckpt_archive.integrations.langgraph import ArchiveSaver
url, opts = sys.argv[1], json.loads(sys.argv[2])
saver = ArchiveSaver.from_url(url, opts)  # from_url's policy: hint_idle=1.0
cfg = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}
for i in range(4):  # the first put (with its snapshot and hint), then 3 plain puts that leave it behind
    cp = generate_checkpoint(channel_values={"turn": i})
    cp["channel_versions"] = {"turn": i + 1}
    cfg = saver.put(cfg, cp, generate_metadata(step=i), {"turn": i + 1})
saver.put_writes(cfg, [("turn", "pending")], "task-1", "p")
print(json.dumps(cfg))
"""


def test_a_process_that_exits_right_after_its_last_put_leaves_the_hint_current(s3_server: S3Server) -> None:
    """A writer process that ends within ``hint_idle`` of its last put puts the idle hint on its way out
    (at interpreter exit), so the next cold reader pays what it pays once a writer went idle (3 round
    trips, 1 LIST: hint; probes, writes; task) instead of the trailing hint's probes (before: 4-6 round
    trips and 2 LISTs). Counted at the store and at the (moto) server."""
    import json
    import os
    import subprocess
    import sys

    url = s3_server.make_bucket("lg-hot-exit") + "/a"
    opts = s3_server.storage_options()
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    done = subprocess.run(
        [sys.executable, "-c", _EXIT_RIGHT_AFTER_PUT, url, json.dumps(opts)],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stderr == "", done.stderr[-2000:]
    cfg = json.loads(done.stdout)
    trips = RoundTrips(ca.open_store(url, opts), latency=0.01)
    s3_server.reset_counts()
    got = ArchiveSaver(ca.ArchiveCheckpointer(trips, probe_window=1)).get_tuple(_config("t"))
    assert got is not None and got.config == cfg and got.pending_writes == [("task-1", "turn", "pending")]
    mine = [kind for kind, path in s3_server.log if path.startswith("/lg-hot-exit")]
    assert trips.depth == 3 and mine.count("LIST") == 1, (trips.calls, mine)


def test_closing_the_saver_puts_the_idle_hint(tmp_path: Path) -> None:
    """``ArchiveSaver.close()`` (and leaving its ``with`` block) puts the hint ``hint_idle`` would put
    later, so nothing is left for the exit hook; closing again puts nothing."""
    trips = RoundTrips(ca.open_store(str(tmp_path)))
    archive = ca.ArchiveCheckpointer(trips, hint_every=SAVER_HINT_EVERY, hint_idle=600)
    with ArchiveSaver(archive) as saver:
        _grow(saver, "t", 3)
        trips.reset()
    assert trips.requests["put"] == 1 and trips.calls[0][1].endswith("_head.json.zst"), trips.calls
    trips.reset()
    saver.close()
    assert trips.calls == [], trips.calls


class _PerElement:
    """Counts the per-element checks of list channels (``values.same_json``, ``values.message_cell``,
    ``values.exact`` at its top) while installed: what a put does element by element in Python."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.n = 0
        for name in ("same_json", "message_cell", "exact"):
            real = getattr(V, name)

            def counting(*args: Any, _real: Any = real, **kw: Any) -> Any:
                if kw.get("depth", args[1] if len(args) > 1 and type(args[1]) is int else 0) == 0:
                    self.n += 1
                return _real(*args, **kw)

            monkeypatch.setattr(V, name, counting)


@pytest.mark.parametrize("messages", [False, True])
def test_a_put_checks_only_the_new_elements_of_a_list_that_grew(
    monkeypatch: pytest.MonkeyPatch, messages: bool
) -> None:
    """With ``add_messages`` LangGraph hands each put the whole list. The elements the parent's list
    already held are checked in one C-speed pass over the list (``held.kept_prefix``: one strict dump,
    one ``==``, one ``marshal``, the prior's text kept from the put before), not element by element in
    Python: the per-element checks of a put are those of its new elements, the same at 10 and at 120
    elements (before: one or more per element). An element mutated in place is still seen
    (``test_an_element_mutated_in_place_is_stored_anew``)."""
    from langchain_core.messages import AIMessage

    def element(i: int) -> Any:
        return AIMessage(f"m{i}", id=f"m{i}") if messages else {"role": "user", "content": f"m{i}", "n": i}

    counts = {}
    for n in (10, 120):
        saver = ArchiveSaver.from_url(f"memory://lg-hot-prefix-{n}-{messages}")
        cfg, items = _config("t"), []
        for i in range(n):
            items = [*items, element(i)]
            cp = generate_checkpoint(channel_values={"messages": items})
            cp["channel_versions"] = {"messages": i + 1}
            if i == n - 1:
                counter = _PerElement(monkeypatch)
            cfg = saver.put(cfg, cp, generate_metadata(step=i), {"messages": i + 1})
        counts[n] = counter.n
        monkeypatch.undo()
        got = ArchiveSaver.from_url(f"memory://lg-hot-prefix-{n}-{messages}").get_tuple(cfg)
        assert got is not None and got.checkpoint["channel_values"]["messages"] == items
    # the prefix's checks (for messages ``same_prefix``: its containers and its extra fields), the new
    # element's own and, for messages, what its cell was made from (``held.same_objects``)
    assert counts[10] == counts[120] <= (7 if messages else 4), counts


@pytest.mark.parametrize("messages", [False, True])
def test_an_element_mutated_in_place_is_stored_anew(messages: bool) -> None:
    """An element the parent's list held, changed in place before the next put (same object, same
    position), is stored with its new value: the prefix check compares values, never identities."""
    from langchain_core.messages import AIMessage

    url = f"memory://lg-hot-mutated-{messages}"
    saver = ArchiveSaver.from_url(url)
    first: Any = AIMessage("before", id="m0") if messages else {"content": "before"}
    items = [first]
    cfg = _config("t")
    for i in range(3):
        cp = generate_checkpoint(channel_values={"messages": list(items)})
        cp["channel_versions"] = {"messages": i + 1}
        cfg = saver.put(cfg, cp, generate_metadata(step=i), {"messages": i + 1})
        if i == 0:
            if messages:
                first.content = "after"
                first.additional_kwargs["x"] = {"deep": [1]}  # a nested field, changed in place too
            else:
                first["content"] = 1.0  # lookalike of 1 for json, not the same type
        items.append(AIMessage(f"m{i + 1}", id=f"m{i + 1}") if messages else {"content": i})
    got = ArchiveSaver.from_url(url).get_tuple(cfg)
    assert got is not None
    stored = got.checkpoint["channel_values"]["messages"]
    assert stored == items[:3]
    if messages:
        assert stored[0].content == "after" and stored[0].additional_kwargs == {"x": {"deep": [1]}}
    else:
        assert type(stored[0]["content"]) is float


def _chat_message(i: int) -> Any:
    """The issue graph's messages: a question, a tool call, its result, a ~1 KB answer."""
    from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

    kind = i % 4
    if kind == 0:
        return HumanMessage(f"question-{i}", id=f"h{i}")
    if kind == 1:
        call = {"name": "lookup", "args": {"query": f"q-{i}"}, "id": f"call-{i}", "type": "tool_call"}
        return AIMessage("", tool_calls=[call], id=f"c{i}")
    if kind == 2:
        return ToolMessage(f"result {i}", tool_call_id=f"call-{i - 1}", id=f"t{i}")
    return AIMessage(f"answer-{i} " + "x" * 1000, id=f"a{i}", additional_kwargs={"score": 0.0})


def test_a_put_of_a_message_list_makes_no_python_call_per_element_it_already_held(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A list of LangChain messages that grew (``add_messages``: LangGraph hands each put the whole list)
    keeps the cells of the messages its parent's list held by what those cells were made from, by
    value, in C-speed passes over their fields (``held.same_prefix``): the Python calls ``build_state`` makes in a
    put are the same at 12 and at 120 messages (before: a ``_fields`` call per message held),
    and the messages stored are the ones given."""
    import sys

    import ckpt_archive.integrations.langgraph.saver as saver_module

    real = saver_module.build_state
    counts: dict[int, int] = {}
    for n in (12, 120):  # the last message of each is an answer
        saver = ArchiveSaver.from_url(f"memory://lg-hot-calls-{n}")
        cfg, items = _config("t"), []
        calls = [0]

        def counted(*args: Any, _calls: list[int] = calls, **kw: Any) -> Any:
            def tally(frame: Any, event: str, arg: Any) -> None:
                if event == "call":
                    _calls[0] += 1

            sys.setprofile(tally)
            try:
                return real(*args, **kw)
            finally:
                sys.setprofile(None)

        for i in range(n):
            items = [*items, _chat_message(i)]
            cp = generate_checkpoint(channel_values={"messages": items})
            cp["channel_versions"] = {"messages": i + 1}
            if i == n - 1:
                monkeypatch.setattr(saver_module, "build_state", counted)
            cfg = saver.put(cfg, cp, generate_metadata(step=i), {"messages": i + 1})
        counts[n] = calls[0]
        monkeypatch.undo()
        got = ArchiveSaver.from_url(f"memory://lg-hot-calls-{n}").get_tuple(cfg)
        assert got is not None and got.checkpoint["channel_values"]["messages"] == items
    assert counts[12] == counts[120], counts


_MUTATIONS = (
    "none",
    "content-equal",  # reassigned an equal str: another object, the same value (kept by value)
    "content",
    "nested-twin",  # a nested int made a float in place: 1 and 1.0 are ==, not the same JSON
    "nested-add",
    "tool-call-args",
    "extra",
    "id-equal-int",
    "kwargs-replaced-equal",
    "copy",  # the copy get_tuple hands out (values.fresh_copy): the same values, other objects
    "negative-zero",  # 0.0 made -0.0: ==, not the same JSON
    "bool-for-int",  # an empty dict filled, with a True where a 1 would be ==
)


def _mutate(m: Any, how: str) -> None:
    if how == "content-equal":
        m.content = "".join(list(m.content))
    elif how == "content":
        m.content = m.content + "!"
    elif how == "nested-twin":
        m.additional_kwargs.setdefault("deep", {"v": [1]})["v"][0] = 1.0
    elif how == "nested-add":
        m.response_metadata["k"] = [1, {"x": None}]
    elif how == "tool-call-args" and getattr(m, "tool_calls", None):
        m.tool_calls[0]["args"]["query"] += "?"
    elif how == "extra":
        object.__setattr__(m, "__pydantic_extra__", {"note": 1})
    elif how == "id-equal-int":
        m.name = None
    elif how == "kwargs-replaced-equal":
        m.additional_kwargs = dict(m.additional_kwargs)
    elif how == "negative-zero" and "score" in m.additional_kwargs:
        m.additional_kwargs["score"] = -0.0
    elif how == "bool-for-int":
        m.additional_kwargs["n"] = 1
        m.additional_kwargs["n"] = True


@settings(max_examples=150, deadline=None)
@given(
    st.integers(min_value=1, max_value=12).flatmap(
        lambda n: st.tuples(
            st.just(n), st.lists(st.tuples(st.integers(0, n - 1), st.sampled_from(_MUTATIONS)), max_size=3)
        )
    )
)
def test_the_fields_prefix_check_keeps_only_the_cells_each_element_would_keep(case: tuple[int, Any]) -> None:
    """``same_prefix`` (class, field names, field value types and atoms, containers and extra fields as
    JSON: C-speed passes over the fields) keeps a list of messages' prior cells only when each message,
    checked alone (``values.message_cell`` against its prior cell), keeps its own: a message changed in
    place -- its content, a nested dict or list, a 1 made 1.0, its extra fields -- fails it; messages of
    the same values (unchanged, copied as ``get_tuple`` hands them out, an equal field assigned) pass
    it. And what is encoded after such edits decodes to the messages given."""
    from langchain_core.messages import BaseMessage
    from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

    from ckpt_archive.integrations.langgraph.encoding import SerdeCodec

    n, edits = case
    codec_lists: H.Lists = {}
    codec = SerdeCodec(JsonPlusSerializer(), {}, texts={}, lists=codec_lists)
    values = [_chat_message(i) for i in range(n)]
    entry = codec.encode_channel(values, None)
    held = codec_lists[id(entry[V.ITEMS])]
    assert held[4] is not None  # a list of messages keeps what its cells were made from
    for index, how in edits:
        if how == "copy":
            values[index] = V.fresh_copy(values[index])
        else:
            _mutate(values[index], how)
    one_by_one = all(V.message_cell(m, c) is c for m, c in zip(values, entry[V.ITEMS], strict=True))
    if H.same_prefix(values, held):
        assert one_by_one
    if all(how in ("copy", "content-equal", "kwargs-replaced-equal") for _, how in edits):
        assert H.same_prefix(values, held)  # the same values: kept, whichever objects hold them
    again = codec.encode_channel([*values, _chat_message(n)], entry)
    decoded = codec.decode_channel(again)
    assert all(isinstance(m, BaseMessage) for m in decoded)
    assert [V.readable_message(m) for m in decoded] == [V.readable_message(m) for m in [*values, _chat_message(n)]]


@settings(max_examples=200, deadline=None)
@given(st.lists(_json, min_size=1, max_size=4).flatmap(lambda known: st.tuples(st.just(known), _twin(known))))
def test_the_one_pass_prefix_check_keeps_exactly_the_cells_the_element_checks_keep(pair: tuple[Any, Any]) -> None:
    """``kept_prefix`` (the whole prefix in one strict dump, one ``==``, one ``marshal``) keeps a list's
    prior cells exactly when ``plain_cell`` would keep every one of them element by element: lookalikes
    (tuples, Enums, str/int subclasses, NaN, UUIDs, 1.0 or True for 1) anywhere fail it."""
    known, values = pair
    priors = [V.plain_cell(k, None) for k in known]
    if any(p is None for p in priors):  # a string orjson refuses: never stored as JSON
        return
    lists: H.Lists = {}
    H.keep_list(lists, priors, known, None, 0)
    held = lists[id(priors)]

    def kept(value: Any, prior: Any) -> bool:  # the element's own cell is its prior, or a scalar written alike
        cell = V.plain_cell(value, prior)
        return cell is prior or (
            type(cell) is type(prior) and type(cell) in (str, int, float, bool) and V.dumps(cell) == V.dumps(prior)
        )

    one_by_one = all(kept(v, p) for v, p in zip(values, priors, strict=True))
    assert H.kept_prefix(list(values), held) is one_by_one
    assert H.kept_prefix([*values, "more"], held) is one_by_one  # a longer list: its prefix


def test_a_snapshot_put_on_local_disk_writes_its_objects_in_one_executor_job(tmp_path: Path) -> None:
    """A snapshot put writes several objects before its commit (the snapshot, its rows' segment, pages):
    on local disk each write is a job on the thread pool that the event loop waits on, so they go in
    one job (``ObjectStore.put_many``, ``LocalStore.batched_puts``), then the commit (before: one job
    per object). Counted at the real store's runner, every file still written and read back."""
    store = ca.open_store(str(tmp_path))
    jobs: list[tuple[str, Any]] = []
    run = store._files.run  # type: ignore[attr-defined]

    async def counting(fn: Any, /, *args: Any) -> Any:
        jobs.append((fn.__name__, args))
        return await run(fn, *args)

    store._files.run = counting  # type: ignore[attr-defined]
    archive = ca.ArchiveCheckpointer(store, hint_every=SAVER_HINT_EVERY, hint_idle=600)
    saver = ArchiveSaver(archive)
    cfg = _grow(saver, "t", 10)  # steps 0..9: the next put (step 10) is a snapshot
    jobs.clear()
    cp = generate_checkpoint(channel_values={"turn": 10, "note": "x" * 5000})
    cp["channel_versions"] = {"turn": 11, "note": 11}
    cfg = saver.put(cfg, cp, generate_metadata(step=10), {"turn": 11, "note": 11})
    commit = next(i for i, (name, args) in enumerate(jobs) if name == "_write_local" and args[2] is True)
    before = jobs[:commit]
    files = [
        p for name, args in before for p in ([a[0] for a in args[0]] if name == "_write_many_local" else [args[0]])
    ]
    assert any("/snapshots/" in p for p in files), jobs
    assert len(before) == 1 and len(files) >= 2, before
    got = ArchiveSaver.from_url(str(tmp_path)).get_tuple(cfg)
    assert got is not None and got.checkpoint["channel_values"] == cp["channel_values"]


def test_a_put_dumps_only_the_new_messages(monkeypatch: pytest.MonkeyPatch) -> None:
    """The messages a list already held are compared by the field values they hold now (their
    ``__dict__`` and extra fields, against a private copy kept from the put that stored them: one strict
    dump, ``==``, ``marshal`` for the whole prefix), not by a pydantic dump of each (``values._short``,
    most of a put's CPU at a few hundred messages): a put dumps its new message only, 3 dumps at 10 and
    at 120 messages (its cell, and the check that the cell rebuilds it; before: one more per message)."""
    from langchain_core.messages import AIMessage

    counts = {}
    dumped: list[str] = []
    real = V._short

    def counting(m: Any) -> Any:
        dumped.append(m.id)
        return real(m)

    for n in (10, 120):
        saver = ArchiveSaver.from_url(f"memory://lg-hot-dumps-{n}")
        cfg, items = _config("t"), []
        for i in range(n):
            items = [*items, AIMessage(f"m{i}", id=f"m{i}", response_metadata={"n": i})]
            cp = generate_checkpoint(channel_values={"messages": items})
            cp["channel_versions"] = {"messages": i + 1}
            if i == n - 1:
                dumped.clear()
                monkeypatch.setattr(V, "_short", counting)
            cfg = saver.put(cfg, cp, generate_metadata(step=i), {"messages": i + 1})
        counts[n] = len(dumped)
        monkeypatch.undo()
        got = ArchiveSaver.from_url(f"memory://lg-hot-dumps-{n}").get_tuple(cfg)
        assert got is not None and got.checkpoint["channel_values"]["messages"] == items
    assert counts[10] == counts[120] <= 3, counts


_EXIT_WITH_STORE_GONE = """
from langgraph.checkpoint.conformance.test_utils import generate_checkpoint, generate_metadata
from ckpt_archive.integrations.langgraph import ArchiveSaver
from ckpt_archive.testing import S3Server
server = S3Server().start()
saver = ArchiveSaver.from_url(server.make_bucket("gone") + "/a", server.storage_options())
cfg = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}
for i in range(3):
    cp = generate_checkpoint(channel_values={"turn": i})
    cp["channel_versions"] = {"turn": i + 1}
    cfg = saver.put(cfg, cp, generate_metadata(step=i), {"turn": i + 1})
server.inject(503, "SlowDown", count=10_000, method="PUT")  # the store refuses every write from now on,
# with an idle hint pending: each PUT is retried within its budget (10 s), past the exit's
"""


def test_exit_with_the_store_failing_reports_one_line_and_does_not_hang() -> None:
    """The exit hook is best effort: a store that fails every write costs the process at most
    ``EXIT_FLUSH_SECONDS`` more (not each request's retry budget), one line on stderr, no traceback."""
    import os
    import subprocess
    import sys

    from ckpt_archive.archive.checkpointer import EXIT_FLUSH_SECONDS

    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    t0 = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-c", _EXIT_WITH_STORE_GONE], capture_output=True, text=True, timeout=60, env=env, check=False
    )
    took = time.monotonic() - t0
    assert done.returncode == 0, done.stderr[-2000:]
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("ckpt_archive: owed fold or head hint not put at exit"), done.stderr
    assert took < EXIT_FLUSH_SECONDS + 15, took  # imports and the run itself, plus the bounded wait


@pytest.mark.parametrize("n", [10, 120])
def test_get_tuple_of_the_head_validates_only_the_messages_it_has_not_met(
    request: pytest.FixtureRequest, n: int
) -> None:
    """A LangGraph turn starts with ``get_tuple`` of the head, whose state holds every message so far:
    it goes through the saver's message memo (``SerdeCodec.messages``, as ``list()`` does), so after one
    more message it validates that one (before: every message of the thread, 11 at 10 and 121 at 120),
    and hands out fresh copies: a message of one tuple changed changes no later tuple's."""
    from langchain_core.messages import AIMessage, HumanMessage

    saver = ArchiveSaver.from_url(f"memory://lg-hot-memo-{n}")
    cfg: Any = _config("t")
    messages: list[Any] = []

    def step(i: int) -> None:
        nonlocal cfg, messages
        kind = HumanMessage if i % 2 == 0 else AIMessage
        messages = [*messages, kind(f"turn {i} " + "x" * 200, id=f"m{i}")]
        cp = generate_checkpoint(channel_values={"messages": messages})
        cp["channel_versions"] = {"messages": i + 1}
        cfg = saver.put(cfg, cp, generate_metadata(step=i), {"messages": i + 1})

    for i in range(n):
        step(i)
    first = saver.get_tuple(_config("t"))
    assert first is not None and len(first.checkpoint["channel_values"]["messages"]) == n
    validated = request.getfixturevalue("validated_messages")  # from here on
    step(n)
    got = saver.get_tuple(_config("t"))
    assert validated == [f"m{n}"], len(validated)
    assert got is not None and got.checkpoint["channel_values"]["messages"] == messages
    mine = got.checkpoint["channel_values"]["messages"]
    assert not {id(m) for m in mine} & {id(m) for m in first.checkpoint["channel_values"]["messages"]}
    mine[0].content = "changed"
    mine[-1].additional_kwargs["k"] = 1
    again = saver.get_tuple(_config("t"))
    assert again is not None and again.checkpoint["channel_values"]["messages"] == messages
    assert validated == [f"m{n}"], len(validated)


def test_get_tuple_on_local_disk_reads_in_one_executor_job(tmp_path: Path) -> None:
    """On local disk each blocking call was a job on the thread pool that the event loop waits on and is
    woken from: a warm ``get_tuple`` of the head made two at once (the probe of the next commit, the
    LIST of the head's writes). The reads and listings one turn of the loop asks for now go as one
    job (``sync_fs.Batched``): 1 job (before 2), 2 with pending writes (the objects are read once
    listed; before 3); writes keep a job each. Counted at the real store's runners, the tuples
    whole."""
    store = ca.open_store(str(tmp_path))
    files: Any = store._files  # type: ignore[attr-defined]
    jobs: list[list[str]] = []
    run, submit = files.run, files.read.submit

    async def counting_run(fn: Any, /, *args: Any) -> Any:
        jobs.append([fn.__name__])
        return await run(fn, *args)

    async def counting_submit(fn: Any, calls: Any) -> Any:
        jobs.append([getattr(f, "__name__", "?") for f, _ in calls])
        return await submit(fn, calls)

    files.run, files.read.submit = counting_run, counting_submit
    saver = ArchiveSaver(ca.ArchiveCheckpointer(store, hint_every=SAVER_HINT_EVERY, hint_idle=600))
    last = _grow(saver, "t", 5)
    jobs.clear()
    got = saver.get_tuple(_config("t"))
    assert got is not None and got.config == last and got.pending_writes == []
    assert len(jobs) == 1 and len(jobs[0]) == 2, jobs  # the probe and the LIST, together
    saver.put_writes(last, [("note", "pending")], "task-1", "p")
    fresh = ArchiveSaver(saver.archive)  # the archive's manifest cached, no write objects known
    jobs.clear()
    got = fresh.get_tuple(_config("t"))
    assert got is not None and got.pending_writes == [("task-1", "note", "pending")]
    assert len(jobs) == 2 and len(jobs[0]) == 2, jobs


def test_batched_calls_each_get_their_own_result_or_error() -> None:
    """``Batched``: the calls of one turn share a job, each answered with its own result or exception;
    calls made later go in a job of their own; a caller cancelled before its batch ran takes no answer
    from it and leaves the others theirs."""
    import asyncio

    from ckpt_archive.storage.sync_fs import Batched

    batched = Batched()
    submitted: list[int] = []
    real = batched.submit

    async def counting(fn: Any, calls: Any) -> Any:
        submitted.append(len(calls))
        return await real(fn, calls)

    batched.submit = counting

    def fail() -> None:
        raise FileNotFoundError("absent")

    async def main() -> list[Any]:
        together = await asyncio.gather(batched(len, "abc"), batched(fail), batched(str, 7), return_exceptions=True)
        alone = await batched(len, "de")
        return [*together, alone]

    got = asyncio.run(main())
    assert got[0] == 3 and isinstance(got[1], FileNotFoundError) and got[2:] == ["7", 2]
    assert submitted == [3, 1]

    async def one_cancelled() -> tuple[bool, Any]:  # a caller gone before its batch ran: the others answered
        gone, kept = asyncio.ensure_future(batched(len, "abc")), asyncio.ensure_future(batched(str, 5))
        await asyncio.sleep(0)
        gone.cancel()
        answer = await kept
        return gone.cancelled(), answer

    cancelled, kept = asyncio.run(one_cancelled())
    assert cancelled and kept == "5" and submitted == [3, 1, 2]


@pytest.mark.parametrize("cold", [False, True])
def test_a_delta_channel_snapshot_makes_cells_for_the_messages_since_the_last_one_only(
    monkeypatch: pytest.MonkeyPatch, cold: bool
) -> None:
    """A ``DeltaChannel`` stores no value between its snapshots, and its next snapshot holds the last
    one's messages first: the saver starts it from the last snapshot it put (``cold``: that a history
    walk found, for a saver that did not put it), so only the messages since are made cells
    (``values.message_cell``: before, every message of the thread again, at each snapshot). Only a
    prior: a message changed in place since is made a cell anew, and every snapshot reads back as
    it was put."""
    from langgraph.checkpoint.serde.types import _DeltaSnapshot

    made: list[Any] = []
    real_cell = V.message_cell

    def cell(message: Any, prior: Any) -> Any:
        if prior is None or real_cell(message, prior) is not prior:  # a cell made, not kept
            made.append(message.id)
        return real_cell(message, prior)

    monkeypatch.setattr(V, "message_cell", cell)
    url = f"memory://lg-hot-delta-snapshot-{cold}"
    saver = ArchiveSaver.from_url(url)
    messages = [_chat_message(i) for i in range(60)]
    cfg = _config("t")
    plan = [(36, True), (37, False), (38, False), (50, True), (51, False), (60, True)]
    for step, (n, snapshot) in enumerate(plan):
        if step == 5:
            messages[3].content = "changed in place"
        made.clear()
        values = {"messages": _DeltaSnapshot(messages[:n])} if snapshot else {}
        cp = generate_checkpoint(channel_values=values)
        cp["channel_versions"] = {"messages": step + 1}
        if cold and snapshot and step:  # a saver that did not put the last snapshot: its walk finds it
            saver = ArchiveSaver.from_url(url)
            saver.get_delta_channel_history(config=cfg, channels=["messages"])
        cfg = saver.put(cfg, cp, generate_metadata(step=step), {"messages": step + 1})
        expected = {0: messages[:36], 3: messages[36:50], 5: [messages[3], *messages[50:60]]}.get(step, [])
        assert made == [m.id for m in expected], (step, made)
        got = ArchiveSaver.from_url(url).get_tuple(cfg)
        assert got is not None
        stored = got.checkpoint["channel_values"].get("messages")
        assert (stored.value if snapshot else stored) == (messages[:n] if snapshot else None)


def test_get_tuple_of_the_head_hands_out_each_message_it_met_as_a_copy_in_a_few_calls(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A turn's ``get_tuple`` of the head meets every message of the thread again, in a list it has not
    met (each put's list is a new one): a message cell met before is found by identity and copied
    (``encoding._held``, ``values.fresh_copy``), not dispatched through ``decode``, ``tag_of`` and
    ``_message`` first: at most 4 Python calls a message (the lookup, the copy, its field copy, and a
    JSON copy of a message's containers; before: 6.5), the same per message at 20 and at 120. Each
    read's messages are its own: one changed in place changes no later read."""
    import sys

    import ckpt_archive.integrations.langgraph.reading as reading_module

    real = reading_module.restore_checkpoint
    calls = [0]

    def counted(*args: Any, **kw: Any) -> Any:
        def tally(frame: Any, event: str, arg: Any) -> None:
            if event == "call":
                calls[0] += 1

        sys.setprofile(tally)
        try:
            return real(*args, **kw)
        finally:
            sys.setprofile(None)

    counts: dict[int, int] = {}
    for n in (20, 120):
        saver = ArchiveSaver.from_url(f"memory://lg-hot-held-{n}")
        cfg, messages = _config("t"), []
        for i in range(n):
            messages = [*messages, _chat_message(i)]
            cp = generate_checkpoint(channel_values={"messages": messages})
            cp["channel_versions"] = {"messages": i + 1}
            cfg = saver.put(cfg, cp, generate_metadata(step=i), {"messages": i + 1})
            if i == n - 2:  # the turn before: its head's messages met once
                assert saver.get_tuple(_config("t")) is not None
        monkeypatch.setattr(reading_module, "restore_checkpoint", counted)
        calls[0] = 0
        got = saver.get_tuple(_config("t"))
        counts[n] = calls[0]
        monkeypatch.undo()
        assert got is not None and got.checkpoint["channel_values"]["messages"] == messages
        mine = got.checkpoint["channel_values"]["messages"]
        mine[1].tool_calls[0]["args"]["query"] = "changed"
        mine[-1].additional_kwargs["score"] = 1.0
        mine[0].content = "changed"
        again = saver.get_tuple(_config("t"))
        assert again is not None and again.checkpoint["channel_values"]["messages"] == messages
    assert (counts[120] - counts[20]) / 100 <= 4, counts
