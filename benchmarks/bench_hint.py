"""What each head hint policy (``hint_every``, a writer's setting: ``open_archive(hint_every=...)``) costs on
S3: requests by method and sequential round trips per save, per cold ``load`` and per cold
``ArchiveSaver.get_tuple`` (with and without pending writes on the head).

``hint_every = 1`` is "a hint with every commit"; 10 is the default (docs/design/005-head-hint.md): a plain
delta save writes its commit entry alone, and the hint goes with snapshots, compactions and maintenance,
and with a plain delta once the newest hint is that many commits behind. Readers probe a fixed window
(``PROBE_WINDOW``) past the hint whatever the writer chose.

W1's first ``--steps`` steps on a fresh moto server per run, ``full_snapshot_interval=10``, through
``ckpt_archive.storage.RoundTrips(latency=...)`` (our store interface: every request counted, S3
listings included), requests counted by method at the server. After every save a new store object
(its own S3 client) reads the latest checkpoint: native ``load`` after native saves, LangGraph's
``get_tuple`` after ``ArchiveSaver.put``s (then after one ``put_writes`` on that head), so cold reads see
the hint at every distance from the log.

    .venv/bin/python benchmarks/bench_hint.py [--steps 60 --latency-ms 20 --every 1,10 --idle 1]
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench_core import states

import ckpt_archive as ca
from ckpt_archive.storage import RoundTrips
from ckpt_archive.testing import S3Server

RESULTS = Path(__file__).with_name("results")
PRICE = {"PUT": 0.005, "POST": 0.005, "LIST": 0.005, "GET": 0.0004, "HEAD": 0.0004}
"""S3 Standard request prices, USD per 1,000 (a PUT, COPY, POST or LIST costs 12.5 GETs)."""
METHODS = ("PUT", "GET", "HEAD", "LIST", "POST", "DELETE")
INTERVAL = 10


class Tally:
    """Per kind of operation: requests by method and round trips, summed over the operations."""

    def __init__(self) -> None:
        self.n: Counter[str] = Counter()
        self.requests: dict[str, Counter[str]] = {}
        self.depths: dict[str, list[int]] = {}

    def add(self, kind: str, requests: Counter[str], depth: int) -> None:
        self.n[kind] += 1
        self.requests.setdefault(kind, Counter()).update(requests)
        self.depths.setdefault(kind, []).append(depth)

    def rows(self) -> dict[str, dict[str, Any]]:
        out = {}
        for kind, n in self.n.items():
            mean = {m: self.requests[kind][m] / n for m in METHODS if self.requests[kind][m]}
            depths = self.depths[kind]
            out[kind] = {
                "n": n,
                "requests": mean,
                "usd_per_million": sum(PRICE.get(m, 0.0) * c for m, c in mean.items()) * 1000,
                "rt_mean": sum(depths) / n,
                "rt_max": max(depths),
            }
        return out


def save_kind(step: int, what: str) -> str:
    """A save's row: a snapshot's (every ``INTERVAL``), the one after it (a plain delta that puts the
    snapshot's fold: ``Fold.NEXT_COMMIT``), the one after that (a plain delta that puts the hint naming
    the fold, landed by then: ``ThreadLog.hint_stale``), or any other plain delta."""
    if step % INTERVAL == 0:
        return f"snapshot {what}"
    if step > INTERVAL and step % INTERVAL == 1:
        return f"delta {what} after a snapshot (fold)"
    if step > INTERVAL and step % INTERVAL == 2:
        return f"delta {what} after a fold (hint)"
    return f"delta {what}"


def measured(server: S3Server, trips: RoundTrips, op: Callable[[], Any]) -> tuple[Any, Counter[str], int]:
    trips.reset()
    server.reset_counts()
    result = op()
    return result, Counter(server.requests), trips.depth


def native(server: S3Server, url: str, data: list[dict[str, Any]], latency: float, tally: Tally, every: int) -> None:
    opts = server.storage_options()
    trips = RoundTrips(ca.open_store(url, opts), latency=latency)
    writer = ca.ArchiveCheckpointer(trips, full_snapshot_interval=INTERVAL, hint_every=every)
    writer.save(ca.Checkpoint.new("chat", data[0], step=0))  # creates the archive: not measured
    for step, state in enumerate(data[1:], 1):
        ckpt = ca.Checkpoint.new("chat", state, step=step)
        _, reqs, depth = measured(server, trips, lambda: writer.save(ckpt))  # noqa: B023
        tally.add(save_kind(step, "save"), reqs, depth)
        cold = RoundTrips(ca.open_store(url, opts), latency=latency)
        reader = ca.ArchiveCheckpointer(cold)
        latest, reqs, depth = measured(server, cold, lambda: reader.load("chat"))  # noqa: B023
        assert latest is not None and latest.checkpoint_id == ckpt.checkpoint_id and latest.state == state
        tally.add("cold load, after a snapshot save" if step % INTERVAL == 0 else "cold load", reqs, depth)


def langgraph(
    server: S3Server, url: str, data: list[dict[str, Any]], latency: float, tally: Tally, every: int, idle: float | None
) -> None:
    """``ArchiveSaver`` puts as a burst (each put measured alone), a cold ``get_tuple`` after each (while
    the writer is busy: the hint may trail), then one ``put_writes`` and a cold ``get_tuple`` with pending
    writes; with ``idle`` (``hint_idle``), then the hint the writer puts once idle (``flush_hints``, what
    its timer does) and a cold ``get_tuple`` after it. Readers probe as ``ArchiveSaver.from_url``'s do
    (``SAVER_PROBE_WINDOW``)."""
    from peers import LangGraphStore

    from ckpt_archive.integrations.langgraph import ArchiveSaver
    from ckpt_archive.integrations.langgraph.saver import SAVER_PROBE_WINDOW

    opts = server.storage_options()
    trips = RoundTrips(ca.open_store(url, opts), latency=latency)
    writer = ca.ArchiveCheckpointer(trips, full_snapshot_interval=INTERVAL, hint_every=every, hint_idle=idle)
    store = LangGraphStore(ArchiveSaver(writer))
    store.save("chat", 0, data[0])
    writer.flush_hints()
    config = LangGraphStore.config("chat")

    def cold_read(kind: str, state: dict[str, Any], writes: int) -> None:
        cold = RoundTrips(ca.open_store(url, opts), latency=latency)
        saver = ArchiveSaver(ca.ArchiveCheckpointer(cold, probe_window=SAVER_PROBE_WINDOW))  # as from_url's
        found, reqs, depth = measured(server, cold, lambda: saver.get_tuple(config))
        assert found is not None and found.checkpoint["channel_values"] == state
        assert len(found.pending_writes or []) == writes
        tally.add(kind, reqs, depth)

    for step, state in enumerate(data[1:], 1):
        _, reqs, depth = measured(server, trips, lambda: store.save("chat", step, state))  # noqa: B023
        tally.add(save_kind(step, "put"), reqs, depth)
        cold_read("cold get_tuple", state, 0)
        # a task's write on the head (an interrupted superstep): read apart by get_tuple
        head = LangGraphStore.config("chat", store._head["chat"][0])
        store.saver.put_writes(head, [("messages", f"write {step}")], f"task-{step}")
        cold_read("cold get_tuple, pending writes", state, 1)
        if idle is not None:
            _, reqs, depth = measured(server, trips, writer.flush_hints)
            tally.add("idle hint (per put)", reqs, depth)
            cold_read("cold get_tuple after idle, pending writes", state, 1)


def run(every: int, steps: int, latency: float, idle: float | None = None) -> dict[str, Any]:
    server = S3Server().start()
    try:
        data = states(steps)
        tally = Tally()
        tag = every if idle is None else f"{every}-idle"
        if idle is None:  # hint_idle is the LangGraph writer's setting here: native saves are the rows above
            native(server, server.make_bucket(f"hint-native-{tag}") + "/w1", data, latency, tally, every)
        if "langgraph" in sys.modules or _has_langgraph():
            langgraph(server, server.make_bucket(f"hint-lg-{tag}") + "/w1", data, latency, tally, every, idle)
        return {"every": every if idle is None else f"{every}, idle {idle:g} s", "ops": tally.rows()}
    finally:
        server.stop()


def _has_langgraph() -> bool:
    try:
        import langgraph.checkpoint.base  # noqa: F401
    except ImportError:
        return False
    return True


def render(rows: list[dict[str, Any]], steps: int, latency_ms: float, every: str, idle: float = 0.0) -> str:
    lines = [
        f"Command: `.venv/bin/python benchmarks/bench_hint.py --steps {steps} --latency-ms {latency_ms:g} "
        f"--every {every} --idle {idle:g}`: W1's first {steps} steps on moto, "
        f"`full_snapshot_interval={INTERVAL}`, {latency_ms:g} ms "
        "added to every request (`RoundTrips(latency=...)`); a cold read after every save. Requests are means "
        "per operation, counted at the server; USD per million operations at S3 Standard request prices "
        "(PUT/LIST $0.005, GET $0.0004 per 1,000).",
        "",
        "| hint_every | operation | n | requests (mean, by method) | USD per million | round trips (mean / max) |",
        "|---" * 6 + "|",
    ]
    for r in rows:
        for kind, op in r["ops"].items():
            reqs = ", ".join(f"{m} {c:.2f}" for m, c in op["requests"].items())
            lines.append(
                f"| {r['every']} | {kind} | {op['n']} | {reqs} | {op['usd_per_million']:.2f} "
                f"| {op['rt_mean']:.2f} / {op['rt_max']} |"
            )
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--latency-ms", type=float, default=20.0)
    parser.add_argument("--every", default="1,10")
    parser.add_argument(
        "--idle",
        type=float,
        default=600.0,
        help="hint_idle of a run at ArchiveSaver.from_url's hint_every (0: none); long, so that only flush_hints "
        "(what its timer does once the writer is idle) puts the hint, never during a measured operation",
    )
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    everies = [int(every) for every in args.every.split(",")]
    rows = [run(every, args.steps, args.latency_ms / 1000) for every in everies]
    if args.idle:  # ArchiveSaver.from_url's policy
        from ckpt_archive.integrations.langgraph.saver import SAVER_HINT_EVERY

        rows.append(run(SAVER_HINT_EVERY, args.steps, args.latency_ms / 1000, args.idle))
    text = render(rows, args.steps, args.latency_ms, args.every, args.idle)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "hint.json").write_text(json.dumps(rows))
    (args.out / "hint.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
