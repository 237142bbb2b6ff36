"""PUT-class requests per durable LangGraph call (``put`` + ``put_writes``) on S3 (moto, counted at the server).

The real graph of ``integrations/langgraph/testing.py`` (``build_graph``: a question, an approval interrupt,
a tool call, an answer), ``durability="sync"``, through ``ArchiveSaver.from_url`` with its default hint
policy. Counted: the PUTs during the run by kind of object, then again once the thread has been idle for
``hint_idle`` (the one hint a burst leaves). Issue 20's target: at most 1.1 PUTs per durable call.
Writes ``results/durable.json``.

    PYTHONPATH=$PWD .venv/bin/python benchmarks/bench_durable.py [--turns 12]
"""

from __future__ import annotations

import argparse
import collections
import json
import time
from pathlib import Path
from typing import Any

from bench_peers import RESULTS

BUCKET = "bench-durable"


def kind_of(key: str) -> str:
    """The kind of object a PUT wrote, from its key under the archive root (``format/layout.py``'s names)."""
    from ckpt_archive.format import layout

    return layout.kind_of(key) or key


def run(turns: int) -> dict[str, Any]:
    from ckpt_archive.integrations.langgraph import ArchiveSaver
    from ckpt_archive.integrations.langgraph.saver import SAVER_HINT_IDLE
    from ckpt_archive.integrations.langgraph.testing import build_graph, run_turns
    from ckpt_archive.testing import S3Server, count_calls

    server = S3Server().start()
    try:
        url = server.make_bucket(BUCKET) + "/a"
        saver = ArchiveSaver.from_url(url, server.storage_options())
        calls = count_calls(saver, ("put", "put_writes"))
        graph = build_graph(saver)
        server.reset_counts()
        run_turns(graph, "t", 0, turns, "sync")
        during = [path.split("/", 3)[-1] for kind, path in server.log if kind == "PUT"]
        time.sleep((SAVER_HINT_IDLE or 0) + 1.5)
        after = [path.split("/", 3)[-1] for kind, path in server.log if kind == "PUT"]
    finally:
        server.stop()
    n = calls["put"] + calls["put_writes"]
    return {
        "turns": turns,
        "put": calls["put"],
        "put_writes": calls["put_writes"],
        "puts_during": len(during),
        "puts_with_idle_hint": len(after),
        "per_durable_call": len(after) / max(n, 1),
        "by_kind": dict(collections.Counter(kind_of(k) for k in after)),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=12)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    result = run(args.turns)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "durable.json").write_text(json.dumps(result, indent=1))
    print(
        f"{result['turns']} turns: {result['put']} put + {result['put_writes']} put_writes; "
        f"{result['puts_during']} PUTs during the run, {result['puts_with_idle_hint']} with the idle hint: "
        f"{result['per_durable_call']:.2f} per durable call"
    )
    print(f"by kind: {result['by_kind']}")


if __name__ == "__main__":
    main()
