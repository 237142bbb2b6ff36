"""What each setting of the head hint's one knob (``HINT_LAG``) costs on S3: requests by method and
sequential round trips per save, per cold ``load`` and per cold ``ArchiveSaver.get_tuple``.

``HINT_LAG = 0`` is "a hint with every commit" (no skipped hint, readers probe ``seq`` and ``seq+1``,
no trailing delta applied); 1 is the format's value (docs/design/005-head-hint.md); larger values
show where "one PUT per plain save" leads. The knob is a module constant read at call time, so the
script sets it for each run (a benchmark only: an archive's readers and writers share one value).

W1's first ``--steps`` steps on a fresh moto server per run, ``full_snapshot_interval=10``, through
``ckpt_archive.storage.RoundTrips(latency=...)`` (our store interface: every request counted, S3
listings included), requests counted by method at the server. After every save a new store object
(its own S3 client) reads the latest checkpoint: native ``load`` after native saves, LangGraph's
``get_tuple`` after ``ArchiveSaver.put``s, so cold reads see the hint at every distance from the log.

    .venv/bin/python benchmarks/bench_hint.py [--steps 60 --latency-ms 20 --lags 0,1,3]
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
from ckpt_archive.format import manifest
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


def measured(server: S3Server, trips: RoundTrips, op: Callable[[], Any]) -> tuple[Any, Counter[str], int]:
    trips.reset()
    server.reset_counts()
    result = op()
    return result, Counter(server.requests), trips.depth


def native(server: S3Server, url: str, data: list[dict[str, Any]], latency: float, tally: Tally) -> None:
    opts = server.storage_options()
    trips = RoundTrips(ca.open_store(url, opts), latency=latency)
    writer = ca.ArchiveCheckpointer(trips, full_snapshot_interval=INTERVAL)
    writer.save(ca.Checkpoint.new("chat", data[0], step=0))  # creates the archive: not measured
    for step, state in enumerate(data[1:], 1):
        ckpt = ca.Checkpoint.new("chat", state, step=step)
        _, reqs, depth = measured(server, trips, lambda: writer.save(ckpt))  # noqa: B023
        tally.add("snapshot save" if step % INTERVAL == 0 else "delta save", reqs, depth)
        cold = RoundTrips(ca.open_store(url, opts), latency=latency)
        reader = ca.ArchiveCheckpointer(cold)
        latest, reqs, depth = measured(server, cold, lambda: reader.load("chat"))  # noqa: B023
        assert latest is not None and latest.checkpoint_id == ckpt.checkpoint_id and latest.state == state
        tally.add("cold load", reqs, depth)


def langgraph(server: S3Server, url: str, data: list[dict[str, Any]], latency: float, tally: Tally) -> None:
    from peers import LangGraphStore

    from ckpt_archive.integrations.langgraph import ArchiveSaver

    opts = server.storage_options()
    trips = RoundTrips(ca.open_store(url, opts), latency=latency)
    store = LangGraphStore(ArchiveSaver(ca.ArchiveCheckpointer(trips, full_snapshot_interval=INTERVAL)))
    store.save("chat", 0, data[0])
    for step, state in enumerate(data[1:], 1):
        _, reqs, depth = measured(server, trips, lambda: store.save("chat", step, state))  # noqa: B023
        tally.add("snapshot put" if step % INTERVAL == 0 else "delta put", reqs, depth)
        cold = RoundTrips(ca.open_store(url, opts), latency=latency)
        saver = ArchiveSaver(ca.ArchiveCheckpointer(cold))
        config = LangGraphStore.config("chat")
        found, reqs, depth = measured(server, cold, lambda: saver.get_tuple(config))  # noqa: B023
        assert found is not None and found.checkpoint["channel_values"] == state
        tally.add("cold get_tuple", reqs, depth)


def run(lag: int, steps: int, latency: float) -> dict[str, Any]:
    manifest.HINT_LAG = lag
    server = S3Server().start()
    try:
        data = states(steps)
        tally = Tally()
        native(server, server.make_bucket(f"hint-native-{lag}") + "/w1", data, latency, tally)
        if "langgraph" in sys.modules or _has_langgraph():
            langgraph(server, server.make_bucket(f"hint-lg-{lag}") + "/w1", data, latency, tally)
        return {"lag": lag, "ops": tally.rows()}
    finally:
        server.stop()


def _has_langgraph() -> bool:
    try:
        import langgraph.checkpoint.base  # noqa: F401
    except ImportError:
        return False
    return True


def render(rows: list[dict[str, Any]], steps: int, latency_ms: float, lags: str) -> str:
    lines = [
        f"Command: `.venv/bin/python benchmarks/bench_hint.py --steps {steps} --latency-ms {latency_ms:g} "
        f"--lags {lags}`: W1's first {steps} steps on moto, `full_snapshot_interval={INTERVAL}`, {latency_ms:g} ms "
        "added to every request (`RoundTrips(latency=...)`); a cold read after every save. Requests are means "
        "per operation, counted at the server; USD per million operations at S3 Standard request prices "
        "(PUT/LIST $0.005, GET $0.0004 per 1,000).",
        "",
        "| HINT_LAG | operation | n | requests (mean, by method) | USD per million | round trips (mean / max) |",
        "|---" * 6 + "|",
    ]
    for r in rows:
        for kind, op in r["ops"].items():
            reqs = ", ".join(f"{m} {c:.2f}" for m, c in op["requests"].items())
            lines.append(
                f"| {r['lag']} | {kind} | {op['n']} | {reqs} | {op['usd_per_million']:.2f} "
                f"| {op['rt_mean']:.2f} / {op['rt_max']} |"
            )
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--latency-ms", type=float, default=20.0)
    parser.add_argument("--lags", default="0,1,3")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    default = manifest.HINT_LAG
    try:
        rows = [run(int(lag), args.steps, args.latency_ms / 1000) for lag in args.lags.split(",")]
    finally:
        manifest.HINT_LAG = default
    text = render(rows, args.steps, args.latency_ms, args.lags)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "hint.json").write_text(json.dumps(rows))
    (args.out / "hint.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
