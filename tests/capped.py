"""Run hostile reads in a child process with an address-space cap, and report their peak memory.

A bomb that gets past a bound must fail its test, not take the machine: the child runs under
``RLIMIT_AS`` (``CAP_MB``), so a runaway allocation ends in a ``MemoryError`` the child reports (as an
untyped error, which fails the test) instead of swapping the host. Its own peak resident memory
(``VmHWM``, which counts the C allocations of zstd and pyarrow, unlike tracemalloc) comes back with
the results, for the test to hold against a bound.

One harness for every bomb test (``test_bombs.py``, special files, imports, footers): each passes a
snippet that fills ``out`` with ``attempt(name, fn, expect)``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

CAP_MB = 1536
"""The child's address space: a clean read of the test archives peaks near 150 MB resident (pyarrow
and zstd reserve more address space than they touch, so this is not a resident-memory bound)."""

RESERVATIONS = {"MIMALLOC_ARENA_RESERVE": "64MiB", "MALLOC_ARENA_MAX": "2"}
"""Address space the allocators reserve ahead, held small in the child: pyarrow's mimalloc reserves a
1 GiB arena when a thread first allocates, if the cap leaves that much (it falls back to less when it
does not), and glibc a 64 MiB heap per thread arena. So how much of the cap is left for what runs later
depended on how many threads had started before the first Arrow read (a reader of local disk making
fewer executor jobs left room for the 1 GiB arena), and when none was left, Arrow failed to start its
scan threads and waited on them for ever (``to_table`` of the dataset: a hang, not a MemoryError). In
64 MiB steps and two heaps, the peak is near 1 GB whatever the thread count, well under the cap."""

_PRELUDE = """
import json, resource, sys
cap = int(sys.argv[1]) << 20
resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
import ckpt_archive as ca
args = json.loads(sys.argv[2])
out = {}
def attempt(name, fn, expect=None, *, check=None):
    try:
        got = fn()
        ok = (check(got) if check is not None else got == expect)
        out[name] = "ok" if ok is True else ok if isinstance(ok, str) else "WRONG"
    except ca.CheckpointError as exc:
        out[name] = type(exc).__name__
    except BaseException as exc:
        out[name] = "UNTYPED " + type(exc).__name__ + ": " + str(exc)[:200]
"""

_EPILOGUE = """
try:  # this process's own peak: ru_maxrss also counts the parent it was forked from (a big pytest)
    hwm = [line for line in open("/proc/self/status") if line.startswith("VmHWM:")][0]
    out["peak_mb"] = int(hwm.split()[1]) / 1024
except OSError:
    out["peak_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(json.dumps(out), flush=True)
# the reads are done: skip the interpreter's teardown, where a native thread pool (pyarrow, fsspec's loop)
# torn down under the address-space cap may abort the process ("terminate called without an active
# exception") after the results are out, which is not what is under test
import os
os._exit(0)
"""


def run_capped(snippet: str, args: Any, *, cap_mb: int = CAP_MB, timeout: float = 300) -> dict[str, Any]:
    """Run ``snippet`` (which reads ``args`` and records outcomes with ``attempt``) in a fresh process
    capped at ``cap_mb`` of address space; its ``out`` dict, with ``peak_mb`` added."""
    env = {**os.environ, **RESERVATIONS, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    code = _PRELUDE + snippet + _EPILOGUE
    done = subprocess.run(
        [sys.executable, "-c", code, str(cap_mb), json.dumps(args)],
        capture_output=True,
        text=True,
        env=env,
        timeout=timeout,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def untyped(result: dict[str, Any]) -> list[str]:
    """The outcomes that are neither right nor a typed error."""
    return [f"{k}: {v}" for k, v in result.items() if isinstance(v, str) and v.startswith(("UNTYPED", "WRONG"))]
