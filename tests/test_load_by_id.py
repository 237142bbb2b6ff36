"""A plain save writes no id index (issue 20): ``load_by_id`` finds every committed checkpoint with the id
alone, because an id the archive mints names its thread (``ids.mint_checkpoint_id``), and a foreign id
(LangGraph's, a user's) is looked for in every thread's manifest (spec.md section 8)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ckpt_archive as ca
from ckpt_archive.format import layout
from ckpt_archive.ids import decode_id, mint_checkpoint_id, minted_thread_segment
from ckpt_archive.storage import RoundTrips, open_store

LONG = "a long thread id " * 20  # encoded over MAX_SEGMENT: a hashed folder


def _saved(archive: ca.ArchiveCheckpointer) -> list[ca.Checkpoint]:
    out = []
    for thread in ("t", "a/b", LONG, "ünï ☃"):
        parent = None
        for step in range(4):
            ckpt = ca.Checkpoint.new(thread, {"thread": thread, "step": step}, step=step, parent_id=parent)
            archive.save(ckpt)
            out.append(ckpt)
            parent = ckpt.checkpoint_id
    foreign = ca.Checkpoint.new("t", {"foreign": True}, step=9).model_copy(update={"checkpoint_id": "lg-123"})
    archive.save(foreign)
    out.append(foreign)
    moved = ca.Checkpoint.new("t", {"moved": True}, step=10).model_copy(update={"thread_id": "other"})
    with pytest.raises(ca.DuplicateCheckpointId, match="minted for the thread"):  # an id names its thread
        archive.save(moved)
    return out


def test_every_checkpoint_loads_by_id_alone_and_no_index_is_written(tmp_path: Path) -> None:
    """Minted ids (plain, percent-encoded, hashed and non-ASCII thread folders), a foreign id and the
    copies fork and copy_thread make: a fresh reader loads each by its id alone, and nothing of the
    archive lives outside the thread folders but the marker. A minted id is saved only into its thread."""
    root = tmp_path / "a"
    archive = ca.open_archive(str(root), full_snapshot_interval=3)
    saved = _saved(archive)
    forked = archive.fork(saved[1].checkpoint_id, "forked")
    copies = archive.copy_thread("a/b", "copied")
    assert sorted(os.listdir(root)) == sorted(
        [
            layout.ARCHIVE_MARKER,
            *{layout.thread_dir(t) for t in ("t", "a/b", LONG, "ünï ☃", "forked", "copied")},
        ]
    )
    for ckpt in saved:
        got = ca.open_archive(str(root)).load_by_id(ckpt.checkpoint_id)
        assert got is not None and (got.thread_id, got.state) == (ckpt.thread_id, ckpt.state), ckpt.checkpoint_id
    for cid, thread in [(forked, "forked"), *((new, "copied") for new in copies.values())]:
        got = ca.open_archive(str(root)).load_by_id(cid)
        assert got is not None and got.thread_id == thread
        assert minted_thread_segment(cid) == layout.thread_dir(thread).removeprefix(layout.THREAD_PREFIX)
    assert ca.open_archive(str(root)).load_by_id("no-such-id") is None
    assert ca.open_archive(str(root)).load_by_id(mint_checkpoint_id("t")) is None
    assert archive.verify().ok


def test_a_cold_load_by_a_minted_id_is_three_round_trips_without_a_list(tmp_path: Path) -> None:
    """The id names the folder: the marker, hint and commit 1 together, the log, then the chain's objects."""
    archive = ca.open_archive(str(tmp_path / "a"), full_snapshot_interval=3)
    saved = _saved(archive)
    for ckpt in saved[:16]:  # the minted ones, hashed folder included (its thread id from its hint: 1 GET)
        trips = RoundTrips(open_store(str(tmp_path / "a")), latency=0.005)
        got = ca.ArchiveCheckpointer(trips).load_by_id(ckpt.checkpoint_id)
        assert got is not None and got.state == ckpt.state
        assert trips.requests["list_dir"] == trips.requests["find"] == 0, trips.calls
        assert trips.depth <= (4 if ckpt.thread_id == LONG else 3), trips.calls


def test_a_foreign_id_costs_one_list_and_a_manifest_read_per_thread(tmp_path: Path) -> None:
    """What spec.md section 8 says a foreign id costs, measured; a reader that holds the thread's
    manifest (it saved or read it) finds it with no LIST."""
    archive = ca.open_archive(str(tmp_path / "a"), full_snapshot_interval=3)
    _saved(archive)
    trips = RoundTrips(open_store(str(tmp_path / "a")), latency=0.005)
    reader = ca.ArchiveCheckpointer(trips)
    assert reader.load_by_id("lg-123") is not None
    assert trips.requests["list_dir"] == 1 and trips.requests["find"] == 0, trips.calls
    trips.reset()
    assert reader.load_by_id("lg-123") is not None
    assert trips.requests["list_dir"] == 0, trips.calls  # "t" was read: found again without a LIST
    assert archive.load_by_id("lg-123") is not None  # the writer holds the manifest it saved into


def test_the_same_foreign_id_in_two_threads_is_found_in_the_first_by_name(tmp_path: Path) -> None:
    """Ids are unique within a thread only (spec.md section 8): the archive does not refuse a foreign id
    saved into a second thread, and a load by it alone is the first thread's, in name order."""
    archive = ca.open_archive(str(tmp_path / "a"))
    for thread in ("z", "b", "m"):
        archive.save(ca.Checkpoint.new(thread, {"in": thread}).model_copy(update={"checkpoint_id": "same"}))
    got = ca.open_archive(str(tmp_path / "a")).load_by_id("same")
    assert got is not None and got.state == {"in": "b"}
    with pytest.raises(ca.DuplicateCheckpointId):  # within a thread, still refused
        archive.save(ca.Checkpoint.new("b", {"other": 1}).model_copy(update={"checkpoint_id": "same"}))


@settings(max_examples=200, deadline=None)
@given(st.text(min_size=1, max_size=300))
def test_a_minted_id_names_its_threads_folder(thread: str) -> None:
    try:
        cid = mint_checkpoint_id(thread)
    except ca.InvalidIdentifier:
        return
    segment = minted_thread_segment(cid)
    assert segment is not None and layout.THREAD_PREFIX + segment == layout.thread_dir(thread)
    assert decode_id(segment) in (thread, None)


@pytest.mark.parametrize(
    "forged",
    ["01234567-89ab-7def-8123-456789abcdef~../x", "01234567-89ab-7def-8123-456789abcdef~a/b", "nope~t", "~t"],
)
def test_an_id_that_only_looks_minted_names_no_folder(forged: str) -> None:
    """A segment that encode_id cannot have made (a ``/``, ``..``) is not read as a folder name."""
    assert layout.minted_thread_dir(forged) is None


def test_a_suffix_on_a_minted_id_makes_a_foreign_id(tmp_path: Path) -> None:
    """``typed`` derives edit ids as ``<id>~v2``: the UUID's bits bound to the segment make that a foreign
    id, saved and found like any other, not one "minted for thread ``cart~v2``"."""
    minted = mint_checkpoint_id("cart")
    assert layout.minted_thread_dir(minted) == "thread_id=cart"
    assert layout.minted_thread_dir(minted + "~v2") is None
    archive = ca.open_archive(str(tmp_path / "a"))
    archive.save(ca.Checkpoint.new("cart", {"v": 2}).model_copy(update={"checkpoint_id": minted + "~v2"}))
    got = ca.open_archive(str(tmp_path / "a")).load_by_id(minted + "~v2")
    assert got is not None and got.state == {"v": 2}
