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
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

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


# -- the local store's find: one scandir walk, the entries fsspec's find gave ---------------------------
_ODD = ["a", "b c", ".tmp-" + "0" * 32, ".hidden", "é\u00e8", "new\nline", "back\\slash", "x\udcff", "-", "_index"]


def _old_find(root: Path, top: str) -> dict[str, dict[str, object]]:
    """What ``LocalStore.find`` answered through fsspec (``SyncFs.find``): the behaviour kept."""
    import fsspec

    from ckpt_archive.storage.listing import listing

    fs = fsspec.filesystem("file")
    return listing(str(root), fs.find(fs._strip_protocol(top), detail=True))


def _new_find(root: Path, prefix: str) -> dict[str, dict[str, object]]:
    store = open_store(str(root))
    return run_sync(store.find(prefix))


def _odd_tree(root: Path) -> None:
    """Every kind of entry a local archive's folder may hold, under names no writer makes."""
    (root / "t" / "_log" / "deep" / "er").mkdir(parents=True)
    (root / "empty").mkdir()
    for i, name in enumerate(_ODD):
        (root / "t" / name).write_bytes(b"x" * i)
    (root / "t" / "_log" / "deep" / "er" / "f").write_bytes(b"abc")
    (root / "t" / "_log" / ("." + "tmp-" + "f" * 32)).write_bytes(b"in flight")
    (root / "t" / "to_file").symlink_to(root / "t" / "a")
    (root / "t" / "to_dir").symlink_to(root / "t" / "_log")
    (root / "t" / "loop").symlink_to(root / "t" / "loop")
    (root / "t" / "broken").symlink_to(root / "gone")
    (root / "t" / "up").symlink_to(root)
    os.mkfifo(root / "t" / "fifo")
    (root / "file_top").write_bytes(b"top")
    (root / "link_top").symlink_to(root / "t")


_PREFIXES = ["", "t", "t/_log", "t/a", "file_top", "link_top", "absent", "t/a/under", "empty", "t/broken", "t/loop"]


@pytest.mark.parametrize("prefix", _PREFIXES)
def test_local_find_lists_what_fsspecs_find_listed_on_an_odd_tree(tmp_path: Path, prefix: str) -> None:
    """Hidden and ``.tmp-`` files, FIFOs, symlinks (to a file, a folder, themselves, nothing), names
    with spaces, newlines, backslashes and undecodable bytes, a prefix that is a file, a symlink, absent
    or under a file: the one-``scandir`` walk lists each exactly as fsspec's find + info did (sizes,
    mtimes; symlinks listed, never walked)."""
    _odd_tree(tmp_path)
    top = str(tmp_path / prefix) if prefix else str(tmp_path)
    assert _new_find(tmp_path, prefix) == _old_find(tmp_path, top)


_NAMES = st.sampled_from([*_ODD, "c", "d"])
_TREE: st.SearchStrategy[dict[str, object]] = st.recursive(
    st.sampled_from(["file", "link", "dangling", "fifo"]),
    lambda kids: st.dictionaries(_NAMES, kids, max_size=4),
    max_leaves=12,
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(tree=st.dictionaries(_NAMES, _TREE, max_size=5))
def test_local_find_equals_fsspecs_find_on_any_tree(
    tmp_path_factory: pytest.TempPathFactory, tree: dict[str, object]
) -> None:
    """On random trees of files, folders, symlinks (to the first file made, or to nothing) and FIFOs,
    under odd names, the walk's answer equals fsspec's find's for the whole root and each top folder."""
    root = tmp_path_factory.mktemp("tree")
    first: list[Path] = []

    def make(at: Path, node: object, size: int) -> None:
        if isinstance(node, dict):
            at.mkdir()
            for i, (name, kid) in enumerate(node.items()):
                make(at / name, kid, size + i)
        elif node == "file":
            at.write_bytes(b"y" * size)
            first.append(at)
        elif node == "link":
            at.symlink_to(first[0] if first else root)
        elif node == "dangling":
            at.symlink_to(root / "nowhere")
        else:
            os.mkfifo(at)

    for i, (name, node) in enumerate(tree.items()):
        make(root / name, node, i)
    for prefix in ["", *(name for name in tree if "\\" not in name)]:
        assert _new_find(root, prefix) == _old_find(root, str(root / prefix) if prefix else str(root))


def test_local_find_stats_no_folder_through_fsspec(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A find of an archive's folders is one ``scandir`` walk: no fsspec ``info`` call (before: one per
    folder and file: 64 for this thread of 12 checkpoints with pending writes), the same keys."""
    from fsspec.implementations.local import LocalFileSystem

    _archive_with_folders(tmp_path)
    want = _old_find(tmp_path, str(tmp_path))
    calls: list[object] = []
    real = LocalFileSystem.info

    def counting(self: LocalFileSystem, path: object, **kw: object) -> object:
        calls.append(path)
        return real(self, path, **kw)

    monkeypatch.setattr(LocalFileSystem, "info", counting)
    assert _new_find(tmp_path, "") == want
    assert calls == []
    assert sum(1 for k in want if not k.startswith("_")) > 12


def _archive_with_folders(root: Path, n: int = 12) -> None:
    """A LangGraph thread of ``n`` checkpoints, each with a pending write: a folder of writes each."""
    from langgraph.checkpoint.base import empty_checkpoint

    from ckpt_archive.integrations.langgraph import ArchiveSaver

    saver = ArchiveSaver.from_url(str(root))
    cfg: dict[str, object] = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}
    for i in range(n):
        cp = empty_checkpoint()
        cp["channel_values"] = {"step": i}
        cp["channel_versions"] = {"step": i + 1}
        cfg = saver.put(cfg, cp, {"source": "loop", "step": i, "parents": {}}, {"step": i + 1})  # type: ignore[arg-type]
        saver.put_writes(cfg, [("step", i + 1)], f"task{i}")  # type: ignore[arg-type]
    saver.close()
