"""Where W1's bytes go: each kind of object, as written and after gc, against the zstd floor.

W1 (``bench_core.states``: one thread, ``--steps`` steps, a ~1 KB message appended per step, snapshot
interval 10) through the native API and through LangGraph's ``ArchiveSaver`` on local disk. Bytes are
summed per kind of object (the layout's folders, spec section 3: commit entries and folds apart) and
the floor is the zstd of the final state (the distinct content), as in ``bench_core.py``. Allocated
bytes (4 KiB blocks) are reported too: small files cost more on disk than their size.

Writes ``benchmarks/results/bytes.json`` and ``bytes.md``.

    .venv/bin/python benchmarks/bench_bytes.py [--steps 1000] [--no-langgraph] [--out DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

from bench_core import states
from peers import Archive, Native, available

from ckpt_archive import codec

RESULTS = Path(__file__).with_name("results")


def kind(rel: str) -> str:
    """The kind of object a key is (its layout folder; commit entries and folds apart)."""
    parts = rel.split("/")
    if len(parts) == 1:
        return parts[0]
    if parts[0].startswith("thread_id="):
        if len(parts) == 2:
            return parts[1]
        if parts[1] == "_log":
            return "_log (folds)" if ".manifest." in parts[-1] else "_log (commits)"
        return parts[1]
    return parts[0] if parts[0] != "_langgraph" else "/".join(parts[:2])


def census(root: str) -> dict[str, dict[str, int]]:
    """{kind: {"bytes", "files", "blocks"}} of every file under ``root`` (``blocks``: 4 KiB allocation)."""
    out: dict[str, Counter[str]] = {}
    for folder, _, names in os.walk(root):
        for name in names:
            path = os.path.join(folder, name)
            size = os.path.getsize(path)
            c = out.setdefault(kind(os.path.relpath(path, root)), Counter())
            c["bytes"] += size
            c["files"] += 1
            c["blocks"] += -(-size // 4096) * 4096
    return {k: dict(v) for k, v in sorted(out.items())}


def run(store_cls: Any, name: str, steps: int, tmp: str) -> dict[str, Any]:
    url = f"{tmp}/{name}"
    data = states(steps)
    store = store_cls(url, {})
    for step, state in enumerate(data):
        store.save("chat", step, state)
    written = census(url)
    store.gc()
    after = census(url)
    store.maintain()  # compact (tiered segment merges: off the save path) + gc
    maintained = census(url)
    return {"store": name, "written": written, "after_gc": after, "after_maintenance": maintained}


def total(c: dict[str, dict[str, int]], field: str = "bytes") -> int:
    return sum(v[field] for v in c.values())


def render(rows: list[dict[str, Any]], floor: int, steps: int) -> str:
    out = [
        f"Command: `.venv/bin/python benchmarks/bench_bytes.py --steps {steps}`. W1, {steps} steps, local disk; "
        f"floor (zstd of the final state) = {floor:,} bytes.",
        "",
        "| store | as written | / floor | after gc | / floor | after gc, 4 KiB blocks | files after gc "
        "| after compact + gc | / floor | files after compact + gc |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        w, g, c = total(r["written"]), total(r["after_gc"]), total(r["after_maintenance"])
        out.append(
            f"| {r['store']} | {w:,} | {w / floor:.1f}x | {g:,} | {g / floor:.1f}x | "
            f"{total(r['after_gc'], 'blocks'):,} | {total(r['after_gc'], 'files'):,} | "
            f"{c:,} | {c / floor:.1f}x | {total(r['after_maintenance'], 'files'):,} |"
        )
    for r in rows:
        out += [
            "",
            f"{r['store']}, by kind of object:",
            "",
            "| kind | files | bytes as written | files after gc | bytes after gc | after gc / floor "
            "| files after compact + gc | bytes after compact + gc |",
            "|---|---|---|---|---|---|---|---|",
        ]
        none = {"bytes": 0, "files": 0}
        for k in sorted(set(r["written"]) | set(r["after_gc"]) | set(r["after_maintenance"])):
            w, g, c = (r[name].get(k, none) for name in ("written", "after_gc", "after_maintenance"))
            out.append(
                f"| `{k}` | {w['files']:,} | {w['bytes']:,} | {g['files']:,} | {g['bytes']:,} | "
                f"{g['bytes'] / floor:.2f}x | {c['files']:,} | {c['bytes']:,} |"
            )
    return "\n".join(out) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=1000)
    ap.add_argument("--no-langgraph", action="store_true")
    ap.add_argument("--out", type=Path, default=RESULTS)
    args = ap.parse_args()
    floor = len(codec.compress(codec.dumps(states(args.steps)[-1])))
    stores: list[tuple[Any, str]] = [(Native, "native")]
    if not args.no_langgraph and available("ArchiveSaver"):
        stores.append((Archive, "ArchiveSaver"))
    tmp = tempfile.mkdtemp(prefix="bench-bytes-")
    try:
        rows = [run(cls, name, args.steps, tmp) for cls, name in stores]
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "bytes.json").write_text(json.dumps({"steps": args.steps, "floor": floor, "rows": rows}, indent=1))
    md = render(rows, floor, args.steps)
    (args.out / "bytes.md").write_text(md)
    print(md)


if __name__ == "__main__":
    main()
