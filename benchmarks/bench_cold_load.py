"""What a fresh reader's load of the newest checkpoint reads: round trips and requests, by kind of object.

W1 (``bench_core.states``: one thread, a ~1 KB message appended per step, snapshot interval 10) saved
through the native API on local disk by one writer, closed; then a new store object, counted by
``storage.RoundTrips`` (a request's depth is 1 + the deepest that had completed before it), loads the
newest checkpoint. Its snapshot replays the message list from the lineage's history rows (spec.md
section 5): the head hint names the segments holding them, fetched with the snapshot (section 7).
Then once more after ``compact`` + gc. Writes ``results/cold_load.json``.

    .venv/bin/python benchmarks/bench_cold_load.py [--steps 100,1000] [--out DIR]
"""

from __future__ import annotations

import argparse
import json
import tempfile
from collections import Counter
from datetime import timedelta
from pathlib import Path
from typing import Any

from bench_core import states

import ckpt_archive as ca
from ckpt_archive.format import layout
from ckpt_archive.storage import RoundTrips

RESULTS = Path(__file__).with_name("results")


def cold(root: str, want: dict[str, Any]) -> dict[str, Any]:
    trips = RoundTrips(ca.open_store(root))
    got = ca.ArchiveCheckpointer(trips).load("w1")
    assert got is not None and got.state == want, "the cold load must give the saved state"
    kinds = Counter(layout.kind_of(key) or key for _, key, _ in trips.calls)
    return {"round_trips": trips.depth, "requests": len(trips.calls), "by_kind": dict(sorted(kinds.items()))}


def run(steps: int) -> dict[str, Any]:
    root = tempfile.mkdtemp(prefix="cold-")
    archive = ca.open_archive(root, full_snapshot_interval=10)
    data = states(steps)
    for step, state in enumerate(data):
        archive.save(ca.Checkpoint.new("w1", state, step=step))
    archive.close()
    out = {"steps": steps, "after_saves": cold(root, data[-1])}
    maintainer = ca.open_archive(root)
    maintainer.compact("w1")
    maintainer.gc(grace=timedelta(0), unsafe_no_writers=True)
    maintainer.close()
    out["after_compact_gc"] = cold(root, data[-1])
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", default="100,1000", help="thread lengths, comma-separated")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    rows = [run(int(n)) for n in args.steps.split(",")]
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "cold_load.json").write_text(json.dumps(rows, indent=1) + "\n")
    for row in rows:
        for when in ("after_saves", "after_compact_gc"):
            r = row[when]
            print(
                f"{row['steps']} steps, {when}: {r['round_trips']} round trips, {r['requests']} requests {r['by_kind']}"
            )


if __name__ == "__main__":
    main()
