"""Large values once: one ~1 MB base64 image re-sent in every turn of a chat, on local disk.

Saves ``--turns`` checkpoints, each appending a user message that holds the same image (a data URL,
the way multimodal chat messages carry one) and a line of text, then ``copy_thread``s the thread, and
reports the bytes stored (the sum of the archive's file sizes) after the turns and after the copy,
against the image's own size. With ``--langgraph`` it runs the same turns through ``ArchiveSaver`` (a
``StateGraph`` whose ``messages`` channel appends plain dict messages), whose values are stored as
JSON (spec.md section 11), so the image is one blob, which each turn's pending write object
references too (its name lists the blob, so gc keeps it); it reports the bytes as written and after the
saver's ``collect_writes`` and the archive's ``gc`` (grace 0).

    .venv/bin/python benchmarks/bench_blobs.py [--turns 20] [--image-kb 1024] [--langgraph]
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import operator
import os
import random
import sys
import tempfile
from datetime import timedelta
from pathlib import Path
from typing import Annotated, Any, TypedDict

import ckpt_archive as ca


class State(TypedDict):
    """The LangGraph run's state: a ``messages`` channel that appends."""

    messages: Annotated[list[dict[str, Any]], operator.add]


def image(kb: int) -> str:
    """A data URL of ``kb`` KiB of base64 (random bytes: an already compressed PNG/JPEG looks like this)."""
    raw = random.Random(7).randbytes(kb * 1024 * 3 // 4)
    return "data:image/png;base64," + base64.b64encode(raw).decode()


def message(turn: int, url: str) -> dict[str, Any]:
    content = [{"type": "text", "text": f"turn {turn}: what changed in this screenshot?"}]
    return {"role": "user", "content": [*content, {"type": "image_url", "image_url": {"url": url}}]}


def stored_bytes(root: Path) -> int:
    return sum(p.stat().st_size for p in root.rglob("*") if p.is_file())


def native(root: Path, turns: int, url: str) -> dict[str, int]:
    archive = ca.open_archive(str(root))
    messages: list[Any] = []
    for turn in range(turns):
        messages.append(message(turn, url))
        archive.save(ca.Checkpoint.new("chat", {"messages": list(messages), "turn": turn}, step=turn))
    after_turns = stored_bytes(root)
    archive.copy_thread("chat", "chat-copy")
    after_copy = stored_bytes(root)
    latest = archive.load("chat-copy")
    assert latest is not None and latest.state["messages"] == messages  # rebuilt exactly
    return {"turns": after_turns, "copy": after_copy, "blobs": len(list((root / "_blobs").glob("*")))}


def langgraph(root: Path, turns: int, url: str) -> dict[str, int]:
    from langgraph.graph import END, START, StateGraph

    from ckpt_archive.integrations.langgraph import ArchiveSaver

    def node(state: State) -> dict[str, Any]:
        return {"messages": [{"role": "assistant", "content": "ok"}]}

    graph = StateGraph(State)
    graph.add_node("reply", node)
    graph.add_edge(START, "reply")
    graph.add_edge("reply", END)
    saver = ArchiveSaver(ca.open_archive(str(root)))
    app = graph.compile(checkpointer=saver)
    config: Any = {"configurable": {"thread_id": "chat"}}
    for turn in range(turns):
        app.invoke({"messages": [message(turn, url)]}, config)
    written = stored_bytes(root)
    asyncio.run(saver.maintenance.collect_writes(timedelta(0), unsafe_no_writers=True))
    saver.archive.gc(grace=timedelta(0), unsafe_no_writers=True)
    assert app.get_state(config).values["messages"][-2] == message(turns - 1, url)  # rebuilt exactly
    return {"turns": written, "after_gc": stored_bytes(root), "blobs": len(list((root / "_blobs").glob("*")))}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=20)
    parser.add_argument("--image-kb", type=int, default=1024)
    parser.add_argument("--langgraph", action="store_true")
    parser.add_argument("--out", type=Path, default=None, help="write blobs.json here")
    args = parser.parse_args()
    url = image(args.image_kb)
    result: dict[str, Any] = {"turns": args.turns, "image_bytes": len(url)}
    with tempfile.TemporaryDirectory() as tmp:
        result["native"] = native(Path(tmp) / "native", args.turns, url)
        if args.langgraph:
            result["langgraph"] = langgraph(Path(tmp) / "langgraph", args.turns, url)
    mb = 1e6
    print(f"image: {len(url) / mb:.2f} MB of base64, re-sent in {args.turns} turns")
    print(f"native, after the turns: {result['native']['turns'] / mb:.2f} MB")
    print(f"native, + copy_thread:   {result['native']['copy'] / mb:.2f} MB ({result['native']['blobs']} blob objects)")
    if "langgraph" in result:
        lg = result["langgraph"]
        print(f"LangGraph (ArchiveSaver): {lg['turns'] / mb:.2f} MB as written, {lg['after_gc'] / mb:.2f} MB after gc")
    if args.out is not None:
        os.makedirs(args.out, exist_ok=True)
        (args.out / "blobs.json").write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    sys.exit(main())
