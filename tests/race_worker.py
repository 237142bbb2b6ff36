"""A writer process for the race tests: load the head, append one entry, save; report what committed."""

from __future__ import annotations

import json
import sys

import ckpt_archive as ca


def main() -> None:
    url, opts, name, attempts = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3], int(sys.argv[4])
    archive = ca.open_archive(url, storage_options=opts, full_snapshot_interval=5)
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
