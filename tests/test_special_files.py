"""Special files in a local archive: a FIFO, a device or a symlink to one where an object should be.

Anyone who can write the archive's folder can put a FIFO (every reader's ``open`` blocks until a
writer comes, which may be never) or a symlink to ``/dev/zero`` (a read of it never ends) where the
marker, the head hint, a commit entry or a snapshot should be. Each command that reads the archive
(load, list, load_by_id, verify, gc, export) runs in a capped child with a short timeout, so a hang
fails the test in seconds and a flood ends in the child's ``MemoryError``: each must give the right
answer or a typed error, and verify must report the file as what it is.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import ckpt_archive as ca
from ckpt_archive._sync import run_sync
from ckpt_archive.storage import open_store
from tests.capped import run_capped
from tests.test_bombs import PEAK_MB, build, objects_of

_READER = """
import io
from datetime import timedelta
from ckpt_archive.transfer import write_portable
root, ids, want = args["root"], args["ids"], args["states"]
attempt("load", lambda: ca.open_archive(root).load("t").state, want[-1])
attempt("list", lambda: [i.checkpoint_id for i in ca.open_archive(root).list("t")], ids)
attempt("load_by_id", lambda: ca.open_archive(root).load_by_id(ids[1]).state, want[1])
def verify():
    report = ca.open_archive(root).verify()
    return True if report.ok else "reported " + ",".join(sorted({p.kind for p in report.problems}))
attempt("verify", verify, check=lambda got: got)
attempt("export", lambda: write_portable(ca.open_archive(root), ["t"], io.BytesIO())[0].copied, len(ids))
attempt("gc", lambda: ca.open_archive(root).gc(grace=timedelta(0), unsafe_no_writers=True) and True, True)
from ckpt_archive.analysis import open_dataset
attempt("dataset", lambda: open_dataset(root).to_table().num_rows, check=lambda rows: rows > 0)
"""


def plant(target: Path, special: str) -> None:
    target.unlink()
    if special == "fifo":
        os.mkfifo(target)
    else:
        target.symlink_to("/dev/zero")


@pytest.mark.parametrize("special", ["fifo", "/dev/zero"])
@pytest.mark.parametrize("kind", ["archive marker", "head hint", "commit entry", "snapshot", "delta segment"])
def test_a_special_file_in_the_archive_never_hangs_or_floods_a_reader(tmp_path: Path, kind: str, special: str) -> None:
    root = tmp_path / "archive"
    saved = build(root)
    targets = objects_of(root, kind)
    assert targets, kind
    planted = targets[-1:]
    for target in planted:
        plant(target, special)
    args = {"root": str(root), "ids": [c.checkpoint_id for c in saved], "states": [c.state for c in saved]}
    result = run_capped(_READER, args, timeout=30)  # a hang is a TimeoutExpired, in seconds
    peak = result.pop("peak_mb")
    assert peak < PEAK_MB, (kind, special, peak, result)
    assert all(not r.startswith(("UNTYPED", "WRONG")) for r in result.values()), result
    # verify raises none: it reports the file as what it is, and checks the rest
    assert result["verify"].startswith("reported") and "NotARegularFile" in result["verify"], result
    if kind == "head hint":  # optional: readers fold the log instead
        assert [result[k] for k in ("load", "list", "load_by_id", "export")] == ["ok"] * 4, result
    else:
        assert "NotARegularFile" in result.values(), result
    assert all(os.path.lexists(t) for t in planted)  # gc deletes nothing it cannot read
    # the analysts' dataset opens segment files with pyarrow itself: a special one is refused first
    refused = kind in ("delta segment", "archive marker")  # what the dataset reads: segments, after the marker
    assert result["dataset"] == ("NotARegularFile" if refused else "ok"), result


def test_the_refusal_says_what_it_is_and_what_to_do(tmp_path: Path) -> None:
    root = tmp_path / "archive"
    build(root)
    hint = objects_of(root, "head hint")[-1]
    plant(hint, "fifo")
    store = open_store(str(root))
    with pytest.raises(ca.NotARegularFile) as caught:
        run_sync(store.get(str(hint.relative_to(root))))
    message = str(caught.value)
    assert "a FIFO" in message and "remove it" in message and "\n" not in message
    assert isinstance(caught.value, ca.IntegrityError)


def test_a_symlink_to_a_regular_file_is_followed(tmp_path: Path) -> None:
    """Symlinks are a user's choice (an archive assembled from folders elsewhere): one to a regular
    file reads as that file."""
    root = tmp_path / "archive"
    saved = build(root)
    snapshot = objects_of(root, "snapshot")[-1]
    moved = tmp_path / "elsewhere.zst"
    snapshot.rename(moved)
    snapshot.symlink_to(moved)
    cp = ca.open_archive(str(root))
    assert cp.load("t").state == saved[-1].state
    assert cp.verify().ok
