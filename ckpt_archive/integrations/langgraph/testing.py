"""A deterministic LangGraph chat agent for tests and benchmarks (no network, no LLM).

``build_graph(checkpointer)`` compiles a ``StateGraph`` with ``add_messages``: an *agent* node (a fake
chat model that asks a calculator tool, then answers), an *approve* node that stops on ``interrupt()``
for human approval, and a *tools* node running a LangChain ``@tool``; optionally a ``DeltaChannel``
field and a subgraph. Every message has a deterministic id, so two runs compare equal.
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from typing import Annotated, Any, TypedDict

from langchain_core.messages import AIMessage, AnyMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.types import Command, interrupt


@tool
def calculator(a: int, b: int) -> int:
    """Multiply two integers."""
    return a * b


def _concat(state: list[str], batches: Sequence[list[str]]) -> list[str]:
    out = list(state)
    for batch in batches:
        out.extend(batch)
    return out


def _delta_annotation() -> Any:
    try:
        from langgraph.channels.delta import DeltaChannel
    except ImportError:  # older langgraph: a plain reducer channel
        return Annotated[list[str], operator.add]
    return Annotated[list[str], DeltaChannel(_concat, snapshot_frequency=7)]


class ChatState(TypedDict, total=False):
    messages: Annotated[list[AnyMessage], add_messages]
    turns: int
    log: Annotated[list[str], operator.add]


def _agent(state: ChatState) -> dict[str, Any]:
    last = state["messages"][-1]
    turn = state.get("turns", 0)
    if isinstance(last, HumanMessage):
        call = {"name": "calculator", "args": {"a": turn + 2, "b": 7}, "id": f"call-{turn}"}
        return {"messages": [AIMessage("", tool_calls=[call], id=f"ai-{turn}-call")]}
    return {
        "messages": [AIMessage(f"the answer is {last.content}", id=f"ai-{turn}-final")],
        "turns": turn + 1,
    }


def _route(state: ChatState) -> str:
    last = state["messages"][-1]
    return "approve" if isinstance(last, AIMessage) and last.tool_calls else END


def _approve(state: ChatState) -> dict[str, Any]:
    call = state["messages"][-1].tool_calls[0]  # type: ignore[union-attr]
    answer = interrupt({"tool": call["name"], "args": call["args"]})
    return {"log": [f"approved {call['id']}: {answer}"]}


def _tools(state: ChatState) -> dict[str, Any]:
    call = state["messages"][-1].tool_calls[0]  # type: ignore[union-attr]
    result = calculator.invoke(call["args"])
    return {"messages": [ToolMessage(str(result), tool_call_id=call["id"], id=f"tool-{call['id']}")]}


def _subgraph() -> Any:
    class Sub(TypedDict, total=False):
        messages: Annotated[list[AnyMessage], add_messages]
        log: Annotated[list[str], operator.add]

    def note(state: Sub) -> dict[str, Any]:
        return {"log": [f"sub saw {len(state['messages'])} messages"]}

    sub = StateGraph(Sub)
    sub.add_node("note", note)
    sub.add_edge(START, "note")
    sub.add_edge("note", END)
    return sub.compile()


def build_graph(checkpointer: Any, *, delta: bool = False, subgraph: bool = False) -> Any:
    state: Any = ChatState
    if delta:

        class DeltaState(ChatState, total=False):
            notes: _delta_annotation()  # type: ignore[valid-type]

        state = DeltaState
    g: Any = StateGraph(state)

    def agent(s: Any) -> dict[str, Any]:
        out = _agent(s)
        if delta:
            out["notes"] = [f"agent step {len(s['messages'])}"]
        return out

    g.add_node("agent", agent)
    g.add_node("approve", _approve)
    g.add_node("tools", _tools)
    g.add_edge(START, "agent")
    g.add_conditional_edges("agent", _route, ["approve", END])
    g.add_edge("approve", "tools")
    if subgraph:
        g.add_node("sub", _subgraph())
        g.add_edge("tools", "sub")
        g.add_edge("sub", "agent")
    else:
        g.add_edge("tools", "agent")
    return g.compile(checkpointer=checkpointer)


def run_turns(graph: Any, thread_id: str, first: int, last: int, durability: str = "async") -> None:
    """Turns ``first..last-1``: a question, stop at the approval interrupt, approve, get the answer."""
    config = {"configurable": {"thread_id": thread_id}}
    for turn in range(first, last):
        graph.invoke(
            {"messages": [HumanMessage(f"question {turn}", id=f"human-{turn}")]},
            config,
            durability=durability,
        )
        graph.invoke(Command(resume=f"yes {turn}"), config, durability=durability)


def summary(values: dict[str, Any]) -> dict[str, Any]:
    """A JSON view of a final state, for comparing runs across savers and processes."""
    out: dict[str, Any] = {}
    for key, value in sorted(values.items()):
        if key == "messages":
            out[key] = [
                [m.type, m.content, m.id, getattr(m, "tool_calls", None), getattr(m, "tool_call_id", None)]
                for m in value
            ]
        elif key == "__interrupt__":  # interrupt ids derive from random checkpoint ids
            out[key] = [i.value for i in value]
        else:
            out[key] = value
    return out


# -- the issue-21 graph: a tool-using agent on FakeMessagesListChatModel ---------------------------------
ANSWER_PAD = 1000
"""Characters of padding in each final answer (the issue's ~1 KB answer)."""


@tool
def lookup(query: str) -> str:
    """Look a query up (fails on queries containing ``fail``, as a flaky tool does)."""
    if "fail" in query:
        raise ValueError(f"lookup failed for {query}")
    return f"result for {query}"


class ToolChatState(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]


def tool_agent_responses(turns: int, *, fail_every: int = 0) -> list[BaseMessage]:
    """The fake model's replies, two a turn: a ``lookup`` tool call, then a ~1 KB answer. With
    ``fail_every=k``, every k-th turn's query makes the tool fail (its ToolMessage has ``status="error"``)."""
    out: list[BaseMessage] = []
    for t in range(turns):
        query = f"fail-{t}" if fail_every and t % fail_every == fail_every - 1 else f"q-{t}"
        call = {"name": "lookup", "args": {"query": query}, "id": f"call-{t}", "type": "tool_call"}
        out.append(AIMessage("", tool_calls=[call], id=f"ai-call-{t}"))
        out.append(AIMessage(f"answer-{t} " + "x" * ANSWER_PAD, id=f"ai-final-{t}"))
    return out


def delta_messages_state(snapshot_frequency: int = 100) -> Any:
    """``ToolChatState`` with ``messages`` a LangGraph 1.2 ``DeltaChannel(_messages_delta_reducer)``, as
    LangGraph's docstring declares it (and ``benchmarks/bench_postgres.py``)."""
    from langgraph.channels.delta import DeltaChannel
    from langgraph.graph.message import _messages_delta_reducer

    reducer: Any = _messages_delta_reducer
    channel: Any = DeltaChannel(reducer, snapshot_frequency=snapshot_frequency)
    return TypedDict("DeltaChatState", {"messages": Annotated[list[AnyMessage], channel]})  # type: ignore[operator]


def delta_chat(checkpointer: Any) -> Any:
    """One node appending one ~1 KB message per turn (``invoke({})``) to a ``DeltaChannel`` (no snapshot
    in 100 updates), and a ``step``: every turn starts with ``get_delta_channel_history``, one step further
    from the seed (``benchmarks/bench_history.py``, ``tests/test_langgraph_history.py``)."""
    from langgraph.channels.delta import DeltaChannel
    from langgraph.graph.message import _messages_delta_reducer

    reducer: Any = _messages_delta_reducer
    fields = {"messages": Annotated[list[Any], DeltaChannel(reducer)], "step": int}
    State = TypedDict("State", fields, total=False)  # type: ignore[misc]

    def chat(s: dict[str, Any]) -> dict[str, Any]:
        i = s.get("step", -1) + 1
        return {"messages": [AIMessage("x" * 1000 + str(i), id=f"m{i}")], "step": i}

    g: Any = StateGraph(State)
    g.add_node("chat", chat)
    g.add_edge(START, "chat")
    g.add_edge("chat", END)
    return g.compile(checkpointer=checkpointer)


def tool_agent(checkpointer: Any, turns: int, *, fail_every: int = 0, delta: int = 0) -> Any:
    """The issue's real graph: an agent node on ``FakeMessagesListChatModel`` (a tool call, then a ~1 KB
    answer), a prebuilt ``ToolNode`` (a tool that raises becomes a ToolMessage with ``status="error"``),
    routed by ``tools_condition``; 4 messages a turn. ``delta=k``: ``messages`` is a ``DeltaChannel``
    snapshotting every ``k`` updates (``delta_messages_state``)."""
    from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
    from langgraph.prebuilt import ToolNode, tools_condition

    model = FakeMessagesListChatModel(responses=tool_agent_responses(turns, fail_every=fail_every))

    def agent(state: Any) -> dict[str, Any]:  # the graph's schema, whichever channel holds the messages
        return {"messages": [model.invoke(state["messages"])]}

    g: Any = StateGraph(delta_messages_state(delta) if delta else ToolChatState)
    g.add_node("agent", agent)
    g.add_node("tools", ToolNode([lookup], handle_tool_errors=True))
    g.add_edge(START, "agent")
    g.add_conditional_edges("agent", tools_condition)
    g.add_edge("tools", "agent")
    return g.compile(checkpointer=checkpointer)


def ask(graph: Any, thread_id: str, turn: int, *, durability: str = "sync") -> None:
    """Turn ``turn``: the question ``question-<turn>`` (id ``human-<turn>``) to ``graph`` in ``thread_id``."""
    question = {"messages": [HumanMessage(f"question-{turn}", id=f"human-{turn}")]}
    graph.invoke(question, {"configurable": {"thread_id": thread_id}}, durability=durability)


def chat(graph: Any, thread_id: str, turns: int, *, durability: str = "sync") -> None:
    """``turns`` questions (``ask``) to ``graph`` in thread ``thread_id``."""
    for t in range(turns):
        ask(graph, thread_id, t, durability=durability)
