"""Splices through the archive: saved, loaded, compacted into Parquet, encrypted, with blobs, read by DuckDB.

A chat history appended to, then edited in place (a message replaced, the last removed, a prefix
summarised, a message inserted): every checkpoint loads exactly, each edit is one ``splice`` row of
only the changed messages, and the documented DuckDB queries (docs/guides/analysis-cli.md, run as
written) give every message once, in order, and replay to the API's history.
"""

from __future__ import annotations

import io
import json
import random
import re
from pathlib import Path
from typing import Any

import duckdb
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

import ckpt_archive as ca
from ckpt_archive import codec
from ckpt_archive._sync import run_sync
from ckpt_archive.analysis import open_dataset
from ckpt_archive.cli import app
from ckpt_archive.format import blobs, layout
from ckpt_archive.format.manifest import unseal

GUIDE = Path(__file__).resolve().parent.parent / "docs" / "guides" / "analysis-cli.md"
IMAGE = "data:image/png;base64," + "QUJD" * 20_000  # 80 KB: a blob (limits.BLOB_MIN_BYTES)
K1 = bytes(range(32))


def msg(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def edits() -> list[tuple[str, list[dict[str, Any]]]]:
    """(what, the message list after it), from an empty list: appends, then edits in place."""
    out: list[tuple[str, list[dict[str, Any]]]] = [("start", [])]
    messages: list[dict[str, Any]] = []
    for i in range(8):
        messages = [*messages, msg(f"turn {i} " + "x" * 100)]
        out.append(("append", messages))
    out.append(("replace message 3", [*messages[:3], msg("turn 3, edited"), *messages[4:]]))
    out.append(("remove the last", out[-1][1][:-1]))
    out.append(("summarise 4", [{"role": "system", "content": "summary of 4 turns"}, *out[-1][1][4:]]))
    out.append(("insert one", [*out[-1][1][:2], msg("inserted"), *out[-1][1][2:]]))
    out.append(("insert an image", [*out[-1][1], {"role": "user", "content": [{"type": "image", "url": IMAGE}]}]))
    out.append(("append two", [*out[-1][1], msg("after the image"), msg("last")]))
    return out


def save_all(archive: ca.ArchiveCheckpointer, thread: str = "t") -> list[ca.Checkpoint]:
    saved, parent = [], None
    for step, (_, messages) in enumerate(edits()):
        c = ca.Checkpoint.new(thread, {"n": step}, step=step, parent_id=parent, messages=messages)
        archive.save(c)
        saved.append(c)
        parent = c.checkpoint_id
    return saved


def inline_ops(archive: ca.ArchiveCheckpointer) -> list[dict[str, Any]]:
    """The message ops of the thread's inline deltas, as stored, in commit order (not the history rows
    a full record keeps inline: its content against the empty one)."""
    keys = sorted(k for k in run_sync(archive.store.find("")) if layout.kind_of(k) == "commit entry")
    docs = [unseal(run_sync(archive.store.get(k)), "commit", kind="commit entry") for k in keys]
    adds = [a for d in docs for a in d["actions"] if a.get("action") == "add" and a["record"]["kind"] == "delta"]
    return [op for a in adds for op in a.get("ops", []) if op.get("target") == "messages"]


@pytest.mark.parametrize("backend", ["local", "memory", "s3"])
def test_edits_in_place_are_splices_of_the_changed_messages_and_load_exactly(archive_url: Any, backend: str) -> None:
    url, opts = archive_url(backend)
    archive = ca.open_archive(url, storage_options=opts, full_snapshot_interval=100)
    saved = save_all(archive)
    ops = inline_ops(archive)
    kinds = [op["op"] for op in ops]
    assert kinds == ["append"] * 8 + ["splice"] * 4 + ["append"] * 2, kinds
    whole = len(codec.dumps(saved[-1].messages))
    for op in ops:  # each delta holds its changed messages (the image as a reference), never the list
        assert len(codec.dumps(op)) < 400, op
    assert ops[9]["value"] == {"at": 7, "remove": 1, "insert": []}  # the last removed: no message stored
    archive.compact("t")
    for again in (archive, ca.open_archive(url, storage_options=opts)):  # cached, then cold
        for c in saved:
            got = again.load_by_id(c.checkpoint_id)
            assert got is not None and got.messages == c.messages and got.state == c.state
        assert [c.messages for c in again.history("t")] == [c.messages for c in saved]
    assert ca.open_archive(url, storage_options=opts).verify().ok
    rows = open_dataset(url, storage_options=opts).to_table().to_pylist()
    assert [r["op"] for r in rows if r["target"] == "messages"] == kinds
    assert sum(len(r["value"]) for r in rows if r["op"] == "splice") < whole // 2


def test_a_spliced_image_is_a_blob_stored_once(tmp_path: Path) -> None:
    """A splice's ``insert`` items go through the blob encoding like every stored value: a large string
    is a reference in the op (inline and in Parquet), stored once, and loads rebuild it."""
    archive = ca.open_archive(str(tmp_path), full_snapshot_interval=100)
    saved = save_all(archive)
    image = saved[-1].messages[-3]
    assert IMAGE in json.dumps(image)
    moved = [*saved[-1].messages[:2], image, *saved[-1].messages[2:]]  # the image again, mid-list
    c = ca.Checkpoint.new("t", {"n": 99}, step=99, parent_id=saved[-1].checkpoint_id, messages=moved)
    archive.save(c)
    last = inline_ops(archive)[-1]
    assert last["op"] == "splice" and last["value"]["at"] == 2 and last["value"]["remove"] == 0
    (ref,) = last["value"]["insert"][0]["content"][0]["url"].values()  # {"$blob": {...}}
    assert ref["size"] == len(IMAGE) and IMAGE not in json.dumps(inline_ops(archive))
    assert [p.name for p in (tmp_path / "_blobs").glob("*")] == [Path(ref["key"]).name]  # stored once
    archive.compact("t")
    (segment,) = tmp_path.rglob("*.parquet")
    assert IMAGE not in segment.read_bytes().decode("latin-1")
    cold = ca.open_archive(str(tmp_path))
    assert cold.load_by_id(c.checkpoint_id).messages == moved  # type: ignore[union-attr]
    assert [x.messages for x in cold.history("t")] == [*(s.messages for s in saved), moved]
    assert cold.verify().ok


def test_encrypted_splices_seal_the_whole_value(tmp_path: Path) -> None:
    enc = ca.Encryption({"k1": K1}, "k1")
    archive = ca.open_archive(str(tmp_path), full_snapshot_interval=100, encryption=enc)
    saved = save_all(archive)
    archive.compact("t")
    segment = next(p for p in tmp_path.rglob("*.parquet"))
    rows = pq.read_table(io.BytesIO(segment.read_bytes())).to_pylist()
    spliced = [r for r in rows if r["op"] == "splice"]
    assert len(spliced) == 4 and all(r["value"].startswith('"enc1:') for r in spliced)
    assert not any("edited" in r["value"] for r in rows)
    cold = ca.open_archive(str(tmp_path), encryption=ca.Encryption({"k1": K1}, "k1"))
    assert [c.messages for c in cold.history("t")] == [c.messages for c in saved]
    assert cold.verify().ok


def guide_queries(root: str) -> tuple[str, str]:
    """The guide's two message queries, exactly as written, on ``root``."""
    blocks = re.findall(r"```sql\n(.*?)```", GUIDE.read_text(), flags=re.S)
    found = [b for b in blocks if "target = 'messages'" in b]
    assert len(found) == 2, "the guide documents the messages query and the edits query"
    return tuple(b.replace("./demo-archive", root).strip().rstrip(";") for b in found)  # type: ignore[return-value]


def test_the_guides_duckdb_queries_give_every_message_once_and_replay_to_the_history(tmp_path: Path) -> None:
    root = str(tmp_path / "archive")
    archive = ca.open_archive(root, full_snapshot_interval=100)
    saved = save_all(archive)
    archive.compact("t")
    items_sql, edits_sql = guide_queries(root)
    items: dict[str, list[Any]] = {}
    for _thread, _step, cid, _op, _i, message in duckdb.sql(items_sql).fetchall():
        items.setdefault(cid, []).append(json.loads(message))
    # every message of the API's history entered it once: the query lists each exactly once
    listed = [codec.dumps(m) for ms in items.values() for m in ms]
    seen = {codec.dumps(m) for c in archive.history("t") for m in blobs.encode(c.messages, codec.sha256)[0]}
    assert sorted(listed) == sorted(seen) and len(set(listed)) == len(listed)
    # replayed from the first checkpoint (a snapshot, not in the segment), they are the API's history
    # in its stored form (a large string a {"$blob": ...} reference: blobs.encode)
    history = list(archive.history("t"))
    assert [c.messages for c in history] == [c.messages for c in saved]
    messages: list[Any] = list(history[0].messages)
    rows = duckdb.sql(edits_sql).fetchall()
    assert [r[2] for r in rows] == [c.checkpoint_id for c in history[1:]]
    for (_thread, _step, cid, op, at, remove, inserted), ckpt in zip(rows, history[1:], strict=True):
        new = items.get(cid, [])
        assert len(new) == inserted
        if op == "append":
            messages = messages + new
        elif op == "splice":
            messages = messages[:at] + new + messages[at + remove :]
        else:
            messages = new
        assert messages == blobs.encode(ckpt.messages, codec.sha256)[0]


def test_cli_diff_reports_a_splice(tmp_path: Path) -> None:
    archive = ca.open_archive(str(tmp_path), full_snapshot_interval=100)
    chat = [msg(f"m{i}") for i in range(6)]
    first = ca.Checkpoint.new("t", {"chat": chat}, step=0)
    archive.save(first)
    edited = [*chat[:2], msg("edited"), *chat[3:]]
    archive.save(ca.Checkpoint.new("t", {"chat": edited}, step=1, parent_id=first.checkpoint_id))
    result = CliRunner().invoke(app, ["diff", "t", "--url", str(tmp_path), "--json"])
    assert result.exit_code == 0, result.output
    body = json.loads(result.output)
    assert body["changed"] == [{"path": ["chat"], "at": 2, "removed": [msg("m2")], "inserted": [msg("edited")]}]
    text = CliRunner().invoke(app, ["diff", "t", "--url", str(tmp_path)]).output
    assert "chat" in text and "at 2" in text and "edited" in text


def test_an_edit_of_a_500_message_chat_stores_a_few_hundred_bytes(tmp_path: Path) -> None:
    """The figure in docs/guarantees.md: 500 messages of ~350 B of incompressible text; each edit's
    commit entry as stored (before ``splice``: a ``set`` of the list, 175,540 B of ops, an 88,833 B entry)."""
    chat = [
        {"role": "user" if i % 2 else "ai", "content": f"message {i} " + random.Random(i).randbytes(150).hex(), "id": i}
        for i in range(500)
    ]
    cases = {
        "replace message 7": [*chat[:7], {**chat[7], "content": "edited"}, *chat[8:]],
        "summarise 40": [{"role": "system", "content": "summary of 40 messages"}, *chat[40:]],
        "remove the last": chat[:-1],
    }
    for i, (what, after) in enumerate(cases.items()):
        root = tmp_path / str(i)
        archive = ca.open_archive(str(root), full_snapshot_interval=100)
        first = ca.Checkpoint.new("t", {}, messages=chat)
        archive.save(first)
        archive.save(ca.Checkpoint.new("t", {}, step=1, parent_id=first.checkpoint_id, messages=after))
        (op,) = inline_ops(archive)
        (entry,) = root.rglob(Path(layout.log_key("t", 2)).name)
        assert op["op"] == "splice" and len(codec.dumps(op)) < 250, what
        assert entry.stat().st_size < 1_000, (what, entry.stat().st_size)
        assert ca.open_archive(str(root)).load("t").messages == after  # type: ignore[union-attr]


def test_a_langgraph_message_channel_edited_in_place_is_a_splice() -> None:
    """LangGraph's list channels go through the same diff: a message removed or replaced mid-history
    (``RemoveMessage``, an edited message) is a splice of that message's encoding only."""
    pytest.importorskip("langgraph")
    from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

    from ckpt_archive.integrations.langgraph.encoding import SerdeCodec, build_state, restore_checkpoint

    codec_ = SerdeCodec(JsonPlusSerializer(pickle_fallback=False))

    def checkpoint(messages: list[Any], version: int) -> dict[str, Any]:
        versions = {"messages": version}
        return {
            "v": 4,
            "id": f"c{version}",
            "ts": "2026-01-01T00:00:00+00:00",
            "channel_values": {"messages": messages},
            "channel_versions": versions,
            "versions_seen": {"node": dict(versions)},
            "updated_channels": None,
        }

    chat = [msg(f"turn {i}") for i in range(50)]
    first = build_state(codec_, checkpoint(chat, 1), {"messages": 1}, None, {})
    path = ["channels", "messages", "items"]
    for after, at, remove, inserted in [
        ([*chat[:10], *chat[11:]], 10, 1, 0),
        ([*chat[:10], msg("edited"), *chat[11:]], 10, 1, 1),
        ([msg("summary"), *chat[20:]], 0, 20, 1),
    ]:
        state = build_state(codec_, checkpoint(after, 2), {"messages": 2}, first, {})
        ops = [op for op in ca.diff(first, state) if op["path"] == path]
        assert [op["op"] for op in ops] == ["splice"], ops
        edit = ops[0]["value"]
        assert (edit["at"], edit["remove"], len(edit["insert"])) == (at, remove, inserted)
        rebuilt = ca.apply(first, ca.diff(first, state))
        assert restore_checkpoint(codec_, rebuilt)["channel_values"]["messages"] == after


@pytest.mark.parametrize(
    "value",
    [
        {"at": 99, "remove": 0, "insert": []},  # past the end
        {"at": 0, "remove": -1, "insert": []},
        {"at": 0, "remove": True, "insert": []},
        {"at": 0, "remove": 0, "insert": "x"},
        {"at": 0, "remove": 0, "insert": [], "x": 1},
        [1, 2],
        {"at": 0, "remove": 1, "insert": []},  # well-formed, but not the saved content
    ],
)
def test_a_forged_splice_in_a_resealed_commit_is_refused_typed(tmp_path: Path, value: Any) -> None:
    from ckpt_archive.format.manifest import seal

    archive = ca.open_archive(str(tmp_path), full_snapshot_interval=100)
    saved = save_all(archive)
    key = layout.log_key("t", 10)  # step 9: the splice replacing message 3
    doc = unseal(run_sync(archive.store.get(key)), "commit", kind="commit entry")
    (op,) = [op for a in doc["actions"] for op in a.get("ops", []) if op["op"] == "splice"]
    op["value"] = value
    run_sync(archive.store.put(key, codec.compress(seal(doc))))
    run_sync(archive.store.delete([layout.head_key("t")]))
    cold = ca.open_archive(str(tmp_path))
    with pytest.raises(ca.CheckpointError) as err:
        cold.load_by_id(saved[9].checkpoint_id)
    assert "\n" not in str(err.value)
    assert cold.load_by_id(saved[8].checkpoint_id).messages == saved[8].messages  # type: ignore[union-attr]
    assert not cold.verify().ok
