"""A writer process for the gc-safety tests: save checkpoints in a loop and report each one that succeeded.

Arguments: url, storage options (JSON), seconds to save for, gc grace in seconds, and optionally the
fewest saves to make however long they take. It closes its archive when done, as a writer that stops
should: the archive is dropped before interpreter exit, so the exit hook (which holds archives weakly)
would not put the fold its last snapshot owes.

Prints one JSON line per successful save (``{"saved": id, "thread": t, "n": len}``) and one per failed save
(``{"error": type name, "message": ...}``), then ``{"done": true}``.
"""

from __future__ import annotations

import json
import sys
import time

import ckpt_archive as ca


def main() -> None:
    url, opts, seconds = sys.argv[1], json.loads(sys.argv[2]), float(sys.argv[3])
    least = int(sys.argv[5]) if len(sys.argv) > 5 else 0  # saves made however slow the machine is
    grace = float(sys.argv[4])
    from datetime import timedelta

    archive = ca.open_archive(url, storage_options=opts, full_snapshot_interval=3, gc_grace=timedelta(seconds=grace))
    heads: dict[str, ca.Checkpoint | None] = {"a": None, "b": None}
    end = time.monotonic() + seconds
    i = 0
    while time.monotonic() < end or i < least:
        thread = "a" if i % 2 == 0 else "b"
        i += 1
        head = heads[thread]
        items = [*(head.state["items"] if head else []), f"{thread}-{i}"]
        ckpt = ca.Checkpoint.new(thread, {"items": items}, step=(head.step + 1) if head else 0, parent_id=None)
        try:
            archive.save(ckpt)
        except Exception as exc:  # reported, so the test can say which save failed and how
            print(json.dumps({"error": type(exc).__name__, "message": str(exc)[:300]}), flush=True)
            heads[thread] = archive.load(thread)
            continue
        heads[thread] = ckpt
        print(json.dumps({"saved": ckpt.checkpoint_id, "thread": thread, "n": len(items)}), flush=True)
    archive.close()  # puts the folds and hints still owed, as a writer that stops should
    print(json.dumps({"done": True}), flush=True)


if __name__ == "__main__":
    main()
