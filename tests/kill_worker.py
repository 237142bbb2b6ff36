"""Subprocess for the SIGKILL test: saves in a loop, reporting each save once it returned.

    python kill_worker.py URL OPTIONS_JSON THREAD MAX_SAVES [retry]
    python kill_worker.py zygote URL OPTIONS_JSON THREAD

The zygote imports everything once, then forks a fresh saver for each ``go LOGFILE`` line
on stdin and prints its pid, so a kill test does not pay the interpreter start-up per kill.

Prints ``<checkpoint_id> <step>`` after each save returned (flushed), so every line is a
checkpoint the process was told is saved. With ``retry`` a CheckpointConflict (another
writer committed first) makes it reload and try again; ``conflict`` lines count those.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any


def state(step: int) -> dict[str, Any]:
    return {
        "step": step,
        "messages": [f"message {i}" for i in range(step % 40)],
        "pad": "x" * (step % 7 * 50),
    }


def save_loop(url: str, opts: dict[str, Any], thread: str, max_saves: int, retry: bool) -> None:
    import ckpt_archive as ca

    cp = ca.open_archive(url, storage_options=opts, full_snapshot_interval=4)
    done = 0
    while done < max_saves:
        latest = cp.load(thread)
        step = 0 if latest is None else latest.step + 1
        try:
            cid = cp.save(ca.Checkpoint.new(thread, state(step), step=step))
        except ca.CheckpointConflict:
            if not retry:
                raise
            print("conflict", flush=True)
            continue
        print(f"{cid} {step}", flush=True)
        done += 1


def zygote(url: str, opts: dict[str, Any], thread: str) -> None:
    import signal

    import ckpt_archive  # noqa: F401  (imports paid once; no I/O thread started before fork)

    if "s3" in url:
        import s3fs  # noqa: F401
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # children are reaped automatically
    for line in sys.stdin:
        cmd, _, log = line.strip().partition(" ")
        if cmd != "go":
            break
        pid = os.fork()
        if pid == 0:
            fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
            os.dup2(fd, 1)
            sys.stdout = open(1, "w", closefd=False)  # noqa: SIM115
            save_loop(url, opts, thread, 1_000_000, False)
            os._exit(0)
        print(pid, flush=True)


def main() -> None:
    os.environ.setdefault("GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT", "false")
    if sys.argv[1] == "zygote":
        zygote(sys.argv[2], json.loads(sys.argv[3]), sys.argv[4])
        return
    url, opts, thread, max_saves = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3], int(sys.argv[4])
    save_loop(url, opts, thread, max_saves, len(sys.argv) > 5 and sys.argv[5] == "retry")


if __name__ == "__main__":
    main()
