"""Issue 19 item 9: what deleting the newest commit entry of a thread does, and what verify detects.

A thread's log is a run of put-if-absent entries; deleting the newest one leaves a shorter run that is a
valid log by itself. Only the head hint can tell: when it names the deleted entry (by seq and
``entry_sha256``), verify reports ``MissingCommit`` naming the lost checkpoint; when it trails the log
(``hint_every``: by default a plain delta writes its commit alone), nothing on storage says that an
entry is gone, and the thread silently reads as of the commit before (docs/guarantees.md). A writer
that puts the hint with every commit (``hint_every=1``, as ``ArchiveSaver.from_url`` does) makes every
such deletion detected. The figures of docs/guarantees.md are the counts these tests assert.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import ckpt_archive as ca
from ckpt_archive.format import layout
from ckpt_archive.format.manifest import unseal

POSITIONS = range(1, 11)  # delete the newest entry of a thread of 1..10 commits (steps 0..9, one chain)


def delete_newest(root: Path, n: int, hint_every: int) -> tuple[bool, ca.VerifyReport, ca.Checkpoint]:
    """Save ``n`` checkpoints, delete commit entry ``n``; returns (did the hint name entry n, the report
    of a fresh verify, the newest checkpoint)."""
    archive = ca.open_archive(str(root), hint_every=hint_every)
    saved = [ca.Checkpoint.new("t", {"n": step, "pad": "x" * 50}, step=step) for step in range(n)]
    for ckpt in saved:
        archive.save(ckpt)
    hint = unseal((root / layout.head_key("t")).read_bytes(), "hint", thread_id="t", kind="head hint")
    (root / layout.log_key("t", n)).unlink()
    reader = ca.open_archive(str(root))
    head = reader.load("t")
    assert head is None or head.checkpoint_id != saved[-1].checkpoint_id  # the deletion did lose it
    return hint["seq"] == n, reader.verify(), saved[-1]


@pytest.mark.parametrize(
    ("hint_every", "detected"), [(10, 1), (5, 2), (1, 10)]
)  # 10: the default (one hint an interval)
def test_deleting_the_newest_commit_is_detected_where_the_hint_names_it(
    tmp_path: Path, hint_every: int, detected: int
) -> None:
    found = 0
    for n in POSITIONS:
        named, report, newest = delete_newest(tmp_path / f"a{n}", n, hint_every)
        if named:  # the hint names the deleted entry: MissingCommit, naming its checkpoint
            assert [(p.kind, p.checkpoint_id, p.key) for p in report.problems] == [
                ("MissingCommit", newest.checkpoint_id, layout.log_key("t", n))
            ], (n, str(report))
            found += 1
        else:  # the hint trailed the log: the shorter log is consistent, nothing says an entry is gone
            assert report.ok, (n, str(report))
    assert found == detected  # of 10 positions (the figure in docs/guarantees.md)
