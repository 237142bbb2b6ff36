"""Large values of LangGraph pending writes: stored once, as blobs, through the archive's one encoding.

A write object (one per ``put_writes`` call) stores each string of at least ``limits.BLOB_MIN_BYTES``
as a blob reference, and its name lists the blobs (``layout.writes_name``), so gc (spec.md section 10,
rule 5) keeps them from its listing while the object exists. The image case of
``benchmarks/bench_blobs.py --langgraph``, small: one blob object as written, reads equal to LangGraph's
``InMemorySaver``; gc keeps the blob while a write object or a state references it; a hostile write
object (a blob gone, a malformed reference, a name that understates) is a typed error.
"""

from __future__ import annotations

import asyncio
import json
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("langgraph")

from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph

import ckpt_archive as ca
from ckpt_archive import codec, limits
from ckpt_archive.format import layout
from ckpt_archive.format.manifest import ref_keys, seal
from ckpt_archive.integrations.langgraph import ArchiveSaver
from ckpt_archive.testing import S3Server

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
import bench_blobs

KB = 100  # an image of 100 KiB of base64: over the blob threshold
GRACE0: dict[str, Any] = {"grace": timedelta(0), "unsafe_no_writers": True}


def _graph(saver: Any) -> Any:
    def node(state: bench_blobs.State) -> dict[str, Any]:
        return {"messages": [{"role": "assistant", "content": "ok"}]}

    graph = StateGraph(bench_blobs.State)
    graph.add_node("reply", node)
    graph.add_edge(START, "reply")
    graph.add_edge("reply", END)
    return graph.compile(checkpointer=saver)


def _run(saver: Any, turns: int, url: str, thread: str = "chat") -> Any:
    app = _graph(saver)
    config: Any = {"configurable": {"thread_id": thread}}
    for turn in range(turns):
        app.invoke({"messages": [bench_blobs.message(turn, url)]}, config)
    return app


def _blobs(root: Path) -> list[Path]:
    return sorted((root / layout.BLOBS).glob("*")) if (root / layout.BLOBS).exists() else []


def _write_files(root: Path) -> list[Path]:
    return sorted(p for p in (root / layout.LANGGRAPH_WRITES).rglob("*") if p.is_file())


def _seen(saver: Any, thread: str = "chat") -> list[tuple[Any, list[tuple[str, Any]]]]:
    """Every checkpoint's values and pending writes (channel, value), newest first, without the ids
    LangGraph derives from checkpoint ids (dict key order is not kept: spec.md section 11)."""
    config = {"configurable": {"thread_id": thread}}
    return [
        (t.checkpoint["channel_values"], sorted(((c, v) for _, c, v in t.pending_writes), key=_canonical))
        for t in saver.list(config)
    ]


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=repr)


def _started(root: Path, content: str = "hi", **kw: Any) -> tuple[ArchiveSaver, Any, dict[str, Any], Any]:
    """A saver on ``root`` (``open_archive`` options ``kw``), its graph, the thread's config and its head
    after one turn without an image."""
    saver = ArchiveSaver(ca.open_archive(str(root), **kw))
    cfg = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}
    app = _graph(saver)
    app.invoke({"messages": [{"role": "user", "content": content}]}, cfg)
    head = saver.get_tuple(cfg)
    assert head is not None
    return saver, app, cfg, head


def test_an_image_resent_through_a_graph_is_one_blob_as_written_and_reads_as_in_memory(tmp_path: Path) -> None:
    url = bench_blobs.image(KB)
    _run(ArchiveSaver(ca.open_archive(str(tmp_path))), 5, url)
    assert len(_blobs(tmp_path)) == 1  # the write objects reference it too: no second copy
    assert max(p.stat().st_size for p in _write_files(tmp_path)) < 4096  # no write object holds the image
    written = sum(p.stat().st_size for p in tmp_path.rglob("*") if p.is_file())
    assert written < 1.5 * len(url), written  # before: the image inline in each turn's write object
    memory = InMemorySaver()
    _run(memory, 5, url)
    cold = ArchiveSaver(ca.open_archive(str(tmp_path)))  # reads what is stored, nothing cached
    assert _seen(cold) == _seen(memory)


def test_gc_keeps_the_blob_while_a_write_object_or_a_state_references_it(tmp_path: Path) -> None:
    """Right after the writes (grace 0): a blob only a write object references is kept (no record lists
    it) and reads back; once a state carries the writes and ``collect_writes`` deleted the object, the
    state keeps it; after ``delete_thread`` (and the grace of its tombstones) gc deletes it."""
    url = bench_blobs.image(KB)
    saver, app, cfg, head = _started(tmp_path, "no image yet")
    saver.put_writes(head.config, [("messages", [bench_blobs.message(0, url)])], "task-1")
    (blob,) = _blobs(tmp_path)
    assert not any(layout.is_blob_key(k) for i in saver.archive.list("t") for k in _listed(saver, i))
    report = saver.archive.gc(**GRACE0)
    assert report.blobs == 0 and _blobs(tmp_path) == [blob], report
    cold = ArchiveSaver(ca.open_archive(str(tmp_path))).get_tuple(cfg)
    assert cold is not None and cold.pending_writes[-1][2] == [bench_blobs.message(0, url)]
    # a state carries it (the grandchild of the checkpoint the writes belong to), then the object goes
    app.invoke({"messages": [bench_blobs.message(1, url)]}, cfg)
    app.invoke({"messages": [{"role": "user", "content": "and again"}]}, cfg)
    assert asyncio.run(saver.maintenance.collect_writes(**GRACE0)) > 0
    assert not any(url[-100:] in p.read_bytes().decode(errors="replace") for p in _write_files(tmp_path))
    report = saver.archive.gc(**GRACE0)
    assert report.blobs == 0 and _blobs(tmp_path) == [blob], report
    cold = ArchiveSaver(ca.open_archive(str(tmp_path))).get_tuple(cfg)
    assert cold is not None and cold.checkpoint["channel_values"]["messages"][-4] == bench_blobs.message(1, url)
    saver.delete_thread("t")
    report = saver.archive.gc(**GRACE0)
    assert report.blobs == 1 and _blobs(tmp_path) == [], report


def test_gc_deletes_a_write_objects_blob_after_prune_removes_it(tmp_path: Path) -> None:
    """``prune`` (keep_latest) deletes the pruned checkpoints' write objects; the blob only they and the
    removed states referenced goes with the next gc, the kept head's state not holding it."""
    url = bench_blobs.image(KB)
    saver, app, cfg, first = _started(tmp_path, "first")
    saver.put_writes(first.config, [("side", url)], "task-x")  # a write no later step applies
    app.invoke({"messages": [{"role": "user", "content": "second"}]}, cfg)
    assert len(_blobs(tmp_path)) == 1
    assert saver.archive.gc(**GRACE0).blobs == 0
    saver.prune(["t"])
    report = saver.archive.gc(**GRACE0)
    assert report.blobs == 1 and _blobs(tmp_path) == [], report


def _listed(saver: ArchiveSaver, info: ca.CheckpointInfo) -> list[str]:
    """The objects the record of ``info`` lists (its blobs included)."""
    m = asyncio.run(saver.archive.engine.log.manifest(info.thread_id))
    return list(ref_keys(m.records[info.checkpoint_id]))


def test_a_write_object_with_more_blobs_than_its_name_lists_keeps_them_inline(tmp_path: Path) -> None:
    """A call with more distinct large strings than ``layout.WRITES_NAME_BLOBS`` stores them inline (its
    name cannot list them); look-alikes of a reference round-trip as data either way."""
    saver, _app, cfg, head = _started(tmp_path, "hi")
    many = [chr(ord("a") + i) * limits.BLOB_MIN_BYTES for i in range(layout.WRITES_NAME_BLOBS + 1)]
    look_alike = {"$blob": {"key": "_blobs/x.zst", "sha256": "0" * 64, "size": 1}}
    saver.put_writes(head.config, [("few", many[:2]), ("like", look_alike)], "task-1")
    saver.put_writes(head.config, [("many", many), ("like", look_alike)], "task-2")
    listed = [len(layout.writes_blob_names(p.name)) for p in _write_files(tmp_path)]
    assert sorted(listed)[-2:] == [0, 2], listed  # task-1's lists its two; task-2's (and the graph's) none
    assert len(_blobs(tmp_path)) == 2
    cold = ArchiveSaver(ca.open_archive(str(tmp_path))).get_tuple(cfg)
    assert cold is not None
    got = {(t, c): v for t, c, v in cold.pending_writes if t.startswith("task-")}
    assert got == {
        ("task-1", "few"): many[:2],
        ("task-1", "like"): look_alike,
        ("task-2", "many"): many,
        ("task-2", "like"): look_alike,
    }


def test_a_second_turns_write_does_not_put_the_image_again(s3_server: S3Server) -> None:
    """A write skips the blobs its checkpoint's chain lists (in a manifest read less than a ttl ago), as
    a save skips its parent chain's: 3 turns re-sending the image PUT its blob twice (the first write
    and the first checkpoint holding it, which cannot know the write's), not six times."""
    url = s3_server.make_bucket("lg-blobs-skip") + "/a"
    image = bench_blobs.image(KB)
    s3_server.reset_counts()  # the server is shared by the worker's other tests
    _run(ArchiveSaver.from_url(url, s3_server.storage_options()), 3, image)
    mine = [path for kind, path in s3_server.log if kind == "PUT" and path.startswith("/lg-blobs-skip/a/_blobs/")]
    assert len(mine) <= 2, mine


def _one_write_with_image(root: Path) -> tuple[Path, str, dict[str, Any]]:
    url = bench_blobs.image(KB)
    saver, _app, cfg, head = _started(root)
    saver.put_writes(head.config, [("img", url)], "task-1")
    (obj,) = [p for p in _write_files(root) if layout.writes_blob_names(p.name)]
    return obj, url, cfg


def _rewrite(obj: Path, change: Any, name: str | None = None) -> None:
    doc = codec.loads(codec.decompress(obj.read_bytes(), what="test"))
    change(doc)
    body = codec.compress(seal({k: v for k, v in doc.items() if k not in ("format_version", "digest")}))
    target = obj if name is None else obj.with_name(name)
    obj.unlink()
    target.write_bytes(body)


def _ref(doc: dict[str, Any]) -> dict[str, Any]:
    return doc["writes"][0][2]["$blob"]  # type: ignore[no-any-return]


@pytest.mark.parametrize("damage", ["missing", "altered", "bad size", "bad key", "unlisted"])
def test_a_hostile_write_object_is_a_typed_error(tmp_path: Path, damage: str) -> None:
    obj, url, cfg = _one_write_with_image(tmp_path)
    (blob,) = _blobs(tmp_path)
    if damage == "missing":
        blob.unlink()
    elif damage == "altered":
        blob.write_bytes(codec.compress(b"x" * len(url.encode())))
    elif damage == "bad size":
        _rewrite(obj, lambda d: _ref(d).update(size=5))
    elif damage == "bad key":
        _rewrite(obj, lambda d: _ref(d).update(key="_blobs/../x"))
    else:  # the name lists no blob, so gc would not keep it
        _rewrite(obj, lambda d: None, name=obj.name.split(".")[0] + layout.LANGGRAPH_WRITES_SUFFIX)
    error = {"missing": ca.MissingObject, "altered": ca.DigestMismatch}.get(damage, ca.TruncatedObject)
    with pytest.raises(error):
        ArchiveSaver(ca.open_archive(str(tmp_path))).get_tuple(cfg)


def test_an_encrypted_archive_seals_a_writes_blob(tmp_path: Path) -> None:
    enc = ca.Encryption({"k1": b"k" * 32}, "k1")
    url = bench_blobs.image(KB)
    saver, _app, cfg, head = _started(tmp_path, "hi", encryption=enc)
    saver.put_writes(head.config, [("img", url)], "task-1")
    (blob,) = _blobs(tmp_path)
    assert blob.suffix == ".enc" and blob.read_bytes().startswith(b"CKAE1\n")
    raw = b"".join(p.read_bytes() for p in tmp_path.rglob("*") if p.is_file())
    assert url[-200:].encode() not in raw  # the image is nowhere in the clear
    cold = ArchiveSaver(ca.open_archive(str(tmp_path), encryption=enc)).get_tuple(cfg)
    assert cold is not None and ("task-1", "img", url) in cold.pending_writes
    with pytest.raises(ca.KeyUnavailable):
        ArchiveSaver(ca.open_archive(str(tmp_path))).get_tuple(cfg)
