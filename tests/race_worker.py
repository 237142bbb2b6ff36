"""A writer process for the race tests: load the head, append one entry, save; report what committed."""

from __future__ import annotations

import json
import sys

import ckpt_archive as ca


def compactor(archive: ca.ArchiveCheckpointer, attempts: int) -> None:
    """``compact`` in a loop, merging segments 2 at a time (``history.SEGMENT_FANOUT``: tiers, spec.md
    section 6), while the savers save (until the thread has not grown for a second, at most 60 s): its
    commits race theirs. A final ``compact`` after the savers stopped merges what they left."""
    import time

    from ckpt_archive.ops import history

    history.SEGMENT_FANOUT = 2
    done, seen = 0, -1
    quiet = start = time.monotonic()
    while time.monotonic() - start < 60:
        done += archive.compact("race")
        n = len(archive.list("race"))
        if n != seen:
            seen, quiet = n, time.monotonic()
        elif n > 0 and time.monotonic() - quiet > 1.0:
            break
        time.sleep(0.01)
    print(json.dumps({"committed": [], "conflicts": 0, "compactions": done}), flush=True)


def main() -> None:
    url, opts, name, attempts = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3], int(sys.argv[4])
    archive = ca.open_archive(url, storage_options=opts, full_snapshot_interval=5)
    if name == "compactor":
        compactor(archive, attempts)
        return
    committed, conflicts = [], 0
    for i in range(attempts):
        latest = archive.load("race")
        state = {"log": [*(latest.state["log"] if latest else []), f"{name}-{i}"]}
        ckpt = ca.Checkpoint.new("race", state, step=(latest.step + 1) if latest else 0)
        try:
            archive.save(ckpt)
            committed.append(ckpt.checkpoint_id)
            print(json.dumps({"saved": ckpt.checkpoint_id}), flush=True)
        except ca.CheckpointConflict:
            conflicts += 1
    print(json.dumps({"committed": committed, "conflicts": conflicts}), flush=True)


if __name__ == "__main__":
    main()
