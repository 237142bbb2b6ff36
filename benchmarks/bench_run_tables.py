"""What W1's snapshots would cost with their list items stored by run (design note 008, steps 3-5).

W1 (``bench_core.states``: a ~1 KB message appended per step, a snapshot every ``--interval`` steps):
the bytes of the snapshot objects (and their new pages) as written today (``format.content.paged_snapshot``,
the real encode), against the same snapshots with their message list as a run table
(``format.runs.split`` over the provenance the delta engine computes from each record's history rows,
``runs.provenance``), runs naming records by checkpoint id or by distance up the lineage. Ids are minted
as a save mints them (``ids.mint_checkpoint_id``), ``--ms`` apart (a save's time on local disk): ids of
one millisecond share their random bits, ids of different ones do not. Nothing is written to storage;
the floor is the zstd of the final state, as in bench_bytes.py.

    .venv/bin/python benchmarks/bench_run_tables.py [--steps 1000] [--interval 10] [--ms 2]
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

from bench_core import states

from ckpt_archive import codec, ids, versions
from ckpt_archive.delta import diff_checkpoint
from ckpt_archive.format import runs
from ckpt_archive.format.content import paged_snapshot

THREAD = "chat"


def snapshot_bytes(cid: str, stub: dict[str, Any], table: runs.Table) -> int:
    """A snapshot object holding ``stub`` (long lists emptied) and its run table, compressed."""
    doc = {"format_version": versions.FORMAT_VERSION, "type": "snapshot", "thread_id": THREAD}
    doc.update(checkpoint_id=cid, state=stub, runs=table)
    return len(codec.compress(codec.dumps(doc)))


def by_id(table: runs.Table, lineage: list[str]) -> runs.Table:
    """The same table with each run naming its record by checkpoint id instead of distance."""
    return {p: [[lineage[e[0]], *e[1:]] if type(e) is list else e for e in es] for p, es in table.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--interval", type=int, default=10)
    parser.add_argument("--ms", type=float, default=2.0, help="milliseconds between two minted ids")
    args = parser.parse_args()
    content: tuple[dict[str, Any], list[Any]] = ({}, [])
    prov: runs.Prov = runs.EMPTY
    lineage: list[str] = []
    known: dict[str, dict[str, Any]] = {}
    out = {"snapshots": 0, "pages": 0, "pages_snapshots": 0, "runs_by_id": 0, "runs_by_distance": 0, "entries": 0}
    for step, state in enumerate(states(args.steps)):
        cid = ids.mint_checkpoint_id(THREAD)
        time.sleep(args.ms / 1000)
        new = (state, [])
        prov = runs.provenance(prov, cid, diff_checkpoint(*content, *new))  # the record's history rows
        lineage.insert(0, cid)
        content = new
        if step % args.interval:
            continue
        out["snapshots"] += 1
        data, written, refs = paged_snapshot(THREAD, cid, new, known)
        known = {r["digest"]: r for r in refs}
        out["pages_snapshots"] += len(data)
        out["pages"] += sum(len(d) for _, d in written)
        (stub, _), table, _ = runs.split(new, prov, lineage)
        out["runs_by_distance"] += snapshot_bytes(cid, stub, table)
        out["runs_by_id"] += snapshot_bytes(cid, stub, by_id(table, lineage))
        out["entries"] += sum(len(es) for es in table.values())
    floor = len(codec.compress(codec.dumps(content[0])))
    report = {**out, "pages_total": out["pages"] + out["pages_snapshots"], "floor": floor}
    report.update(
        {f"{k}/floor": round(report[k] / floor, 2) for k in ("pages_total", "runs_by_id", "runs_by_distance")}
    )
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
