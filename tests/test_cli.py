"""The ckpt-archive CLI through typer's test runner, on local disk and on S3 (moto over HTTP)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

import ckpt_archive as ca
from ckpt_archive.cli import app
from ckpt_archive.format import layout
from ckpt_archive.testing import S3Server
from tests import sample_archive

BACKENDS = ["local", "s3"]


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    for name in list(os.environ):
        if name.upper().startswith("CKPT_ARCHIVE_"):
            monkeypatch.delenv(name)


def s3_config(path: Path, url: str, opts: dict[str, Any]) -> Path:
    ck = opts["client_kwargs"]
    path.write_text(
        f'url = "{url}"\n'
        "[storage_options]\n"
        'key = "testing"\nsecret = "testing"\nuse_listings_cache = false\n'
        f'client_kwargs = {{ endpoint_url = "{ck["endpoint_url"]}", region_name = "{ck["region_name"]}" }}\n'
    )
    return path


@pytest.fixture(scope="module")
def built(
    tmp_path_factory: pytest.TempPathFactory, s3_server: S3Server
) -> dict[str, tuple[list[str], str, dict[str, Any]]]:
    """Per backend: the CLI arguments that name the session's sample archive, its URL and options."""
    root = tmp_path_factory.getbasetemp()
    local, _ = sample_archive.shared("local", root, s3_server)
    s3, opts = sample_archive.shared("s3", root, s3_server)
    config = s3_config(tmp_path_factory.mktemp("cli") / "s3.toml", s3, opts)
    return {"local": (["--url", local], local, {}), "s3": (["--config", str(config)], s3, opts)}


def run(*args: str, ok: bool = True) -> Any:
    result = CliRunner().invoke(app, list(args), env={"COLUMNS": "200"})
    if ok:
        assert result.exit_code == 0, (result.output, result.stderr, result.exception)
    return result


def run_json(*args: str) -> Any:
    return json.loads(run(*args, "--json").stdout)


@pytest.mark.parametrize("backend", BACKENDS)
def test_threads_history_stats(built: Any, backend: str) -> None:
    where, url, opts = built[backend]
    archive = ca.open_archive(url, storage_options=opts)
    threads = run_json("threads", *where)
    assert [t["thread_id"] for t in threads] == sorted(sample_archive.THREADS)
    alice = next(t for t in threads if t["thread_id"] == "support/alice")
    assert alice["checkpoints"] == 25 and alice["bytes"] == sum(i.stored_bytes for i in archive.list("support/alice"))

    history = run_json("history", "support/bob", *where)
    assert [h["checkpoint_id"] for h in history] == [i.checkpoint_id for i in archive.list("support/bob")]
    assert [h["step"] for h in history] == list(range(13))
    assert history[0]["kind"] == "full" and history[1]["parent_id"] == history[0]["checkpoint_id"]

    stats = run_json("stats", *where)
    assert stats["total"]["threads"] == 3 and stats["total"]["checkpoints"] == 55
    bob = next(r for r in stats["threads"] if r["thread_id"] == "support/bob")
    assert (bob["snapshots"], bob["deltas"]) == (3, 10)  # a snapshot every 5 checkpoints
    assert bob["bytes"] == bob["snapshot_bytes"] + bob["delta_bytes"]
    assert bob["snapshot_growth_per_step"] > 0
    one = run_json("stats", "support/bob", *where)
    assert one["threads"] == [bob]

    text = run("stats", *where).stdout
    assert "support/bob" in text and "55 checkpoints" in text


@pytest.mark.parametrize("backend", BACKENDS)
def test_show_and_diff(built: Any, backend: str) -> None:
    where, url, opts = built[backend]
    archive = ca.open_archive(url, storage_options=opts)
    shown = run_json("show", "support/bob", *where)
    assert shown["step"] == 12 and shown["state"] == sample_archive.state_at("support/bob", 12)
    infos = archive.list("support/bob")
    one = run_json("show", "support/bob", "--checkpoint", infos[3].checkpoint_id, "--key", "plan.stage", *where)
    assert one["value"] == sample_archive.state_at("support/bob", 3)["plan"]["stage"] and "state" not in one

    d = run_json("diff", "support/bob", *where)  # latest against its parent
    assert d["from"] == infos[-2].checkpoint_id and d["to"] == infos[-1].checkpoint_id
    changed = {tuple(c["path"]): c for c in d["changed"]}
    assert changed[("messages",)]["appended"] == sample_archive.state_at("support/bob", 12)["messages"][-1:]
    assert changed[("plan", "stage")] == {"path": ["plan", "stage"], "old": "answer", "new": "draft"}
    assert changed[("turn",)]["old"] == 11 and changed[("turn",)]["new"] == 12
    # step 5 has scratch, step 6 does not: added then removed
    d5 = run_json("diff", "support/bob", "--from", infos[4].checkpoint_id, "--to", infos[5].checkpoint_id, *where)
    assert [a["path"] for a in d5["added"]] == [["scratch"]]
    d6 = run_json("diff", "support/bob", "--from", infos[5].checkpoint_id, "--to", infos[6].checkpoint_id, *where)
    assert d6["removed"] == [{"path": ["scratch"], "old": {"note": "x" * 100}}]
    text = run("diff", "support/bob", *where).stdout
    assert "plan.stage" in text and "messages" in text


def test_errors_are_one_line_without_traceback(built: Any, tmp_path: Path) -> None:
    where, _, _ = built["local"]
    cases = [
        (["show", "nobody", *where], "thread 'nobody' has no checkpoints"),
        (["show", "support/bob", "--checkpoint", "nope", *where], "checkpoint 'nope' is not in thread"),
        (["show", "support/bob", "--key", "missing.key", *where], "key 'missing.key' is not in the state"),
        (["threads"], "no archive URL"),
        (["threads", "--url", str(tmp_path / "typo")], "no archive at"),
        (["verify", "--url", str(tmp_path / "typo")], "no archive at"),
        (["threads", "--config", str(tmp_path / "none.toml")], "does not exist"),
        (["compact", *where], "give at least one thread id, or --all"),
        (["export", "support/bob", *where], "give --to"),
        (["import", str(tmp_path / "x.tar.zst"), *where], "does not exist"),
    ]
    for args, message in cases:
        result = run(*args, ok=False)
        assert result.exit_code == 1, args
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: ") and message in lines[0], (
            args,
            result.stderr,
        )
        assert "Traceback" not in result.output + result.stderr
    assert not (tmp_path / "typo").exists()  # reading never creates an archive
    debug = run("show", "nobody", *where, "--debug", ok=False)
    assert debug.exit_code != 0 and debug.exception is not None and not isinstance(debug.exception, SystemExit)


def test_bad_config_names_field_and_file(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text('url = "memory://x"\nfull_snapshot_interval = 0\n')
    result = run("threads", "--config", str(bad), ok=False)
    assert result.exit_code == 1
    assert "full_snapshot_interval" in result.stderr and str(bad) in result.stderr
    broken = tmp_path / "broken.toml"
    broken.write_text("url = \n")
    result = run("threads", "--config", str(broken), ok=False)
    assert result.exit_code == 1 and "not valid TOML" in result.stderr and str(broken) in result.stderr


def test_verify_finds_a_damaged_object(tmp_path: Path) -> None:
    url = str(tmp_path / "a")
    archive = sample_archive.build(url)
    report = run_json("verify", "--url", url)
    assert report["ok"] is True and report["problems"] == []
    assert (report["threads"], report["checkpoints"], report["verified"]) == (3, 55, 55)
    rec = next(i for i in archive.list("support/bob") if i.kind == "full" and i.step == 5)
    snapshot = next((tmp_path / "a").glob(f"thread_id=support%2Fbob/snapshots/*{layout.encode_id(rec.checkpoint_id)}*"))
    snapshot.write_bytes(b"not zstd at all")
    result = run("verify", "--url", url, "--json", ok=False)
    assert result.exit_code == 1
    body = json.loads(result.stdout)
    assert not body["ok"] and body["verified"] < 55
    bad = {p["checkpoint_id"] for p in body["problems"]}
    assert rec.checkpoint_id in bad and all(p["thread_id"] == "support/bob" for p in body["problems"])
    damaged = [p for p in body["problems"] if p["checkpoint_id"] == rec.checkpoint_id]
    assert damaged and all(p["error"] in {"TruncatedObject", "DigestMismatch"} for p in damaged)
    assert any("snapshots/" in f"{p['message']} {p['key']}" for p in body["problems"])
    text = run("verify", "support/alice", "--url", url).stdout  # another thread is still fine
    assert "OK" in text


def test_compact_closes_open_segments(tmp_path: Path) -> None:
    url = str(tmp_path / "a")
    sample_archive.build(url)  # research 42 keeps its open segment
    out = run_json("compact", "--all", "--url", url)
    assert out == {"compacted": ["research 42"], "unchanged": ["support/alice", "support/bob"]}
    assert run_json("compact", "research 42", "--url", url) == {"compacted": [], "unchanged": ["research 42"]}
    assert run("compact", "nobody", "--url", url, ok=False).exit_code == 1


@pytest.mark.parametrize("backend", BACKENDS)
def test_export_import_roundtrip(built: Any, backend: str, tmp_path: Path) -> None:
    where, url, opts = built[backend]
    source = ca.open_archive(url, storage_options=opts)
    bundle = tmp_path / "alice.tar.zst"
    out = run_json("export", "support/alice", "research 42", "--to", str(bundle), *where)
    assert [t["copied"] for t in out["threads"]] == [25, 17]
    dest_url = str(tmp_path / "dest")
    got = run_json("import", str(bundle), "--url", dest_url)
    assert [(t["thread_id"], t["copied"], t["skipped"]) for t in got["threads"]] == [
        ("support/alice", 25, 0),
        ("research 42", 17, 0),
    ]
    dest = ca.open_archive(dest_url)
    for thread in ("support/alice", "research 42"):
        src_infos, dst_infos = source.list(thread), dest.list(thread)
        assert [(i.checkpoint_id, i.parent_id, i.step, i.created_at, i.metadata) for i in src_infos] == [
            (i.checkpoint_id, i.parent_id, i.step, i.created_at, i.metadata) for i in dst_infos
        ]
        for info in src_infos:
            a, b = source.load_by_id(info.checkpoint_id), dest.load_by_id(info.checkpoint_id)
            assert a is not None and b is not None and a.state == b.state
    again = run_json("import", str(bundle), "--url", dest_url, "--thread", "research 42")
    assert [(t["copied"], t["skipped"]) for t in again["threads"]] == [(0, 17)]
    if backend == "s3":
        return  # archive-to-archive copy: once is enough (local source)
    copy_url = str(tmp_path / "copy")
    run_json("export", "--all", "--to", copy_url, *where)
    assert sorted(ca.open_archive(copy_url).threads()) == sorted(sample_archive.THREADS)
    assert run_json("verify", "--url", copy_url)["verified"] == 55


def test_export_import_after_prune(tmp_path: Path) -> None:
    """The issue's sequence: prune --keep-last 5, export, import; and export --all to an archive."""
    src = str(tmp_path / "src")
    sample_archive.build(src)
    run("prune", "--all", "--keep-last", "5", "--apply", "--url", src)
    source = ca.open_archive(src)
    assert {len(source.list(t)) for t in source.threads()} == {5}
    bundle = str(tmp_path / "pruned.tar.zst")
    assert [t["copied"] for t in run_json("export", "--all", "--to", bundle, "--url", src)["threads"]] == [5, 5, 5]
    restored, copy = str(tmp_path / "restored"), str(tmp_path / "copy")
    got = run_json("import", bundle, "--url", restored)
    assert [(t["copied"], t["skipped"]) for t in got["threads"]] == [(5, 0)] * 3
    assert sum(t["copied"] for t in run_json("export", "--all", "--to", copy, "--url", src)["threads"]) == 15
    for url in (restored, copy):
        dest = ca.open_archive(url)
        assert dest.threads() == source.threads()
        for thread in source.threads():
            src_infos = source.list(thread)
            assert src_infos[0].parent_id is not None  # its parent was pruned away
            assert [(i.checkpoint_id, i.parent_id, i.step, i.created_at, i.metadata) for i in src_infos] == [
                (i.checkpoint_id, i.parent_id, i.step, i.created_at, i.metadata) for i in dest.list(thread)
            ]
            assert [c.state for c in source.history(thread)] == [c.state for c in dest.history(thread)]
        assert run_json("verify", "--url", url)["verified"] == 15


def test_import_refuses_a_foreign_thread_and_bad_files(tmp_path: Path) -> None:
    src = str(tmp_path / "src")
    sample_archive.build(src)
    dest = ca.open_archive(str(tmp_path / "dest"))
    dest.save(ca.Checkpoint.new("support/bob", {"other": True}))
    result = run("import", src, "--url", str(tmp_path / "dest"), "--thread", "support/bob", ok=False)
    assert result.exit_code == 1 and "already exists in the destination" in result.stderr
    assert [i.step for i in dest.list("support/bob")] == [0]  # nothing was added
    junk = tmp_path / "junk.tar.zst"
    junk.write_bytes(b"\x28\xb5\x2f\xfd garbage")
    result = run("import", str(junk), "--url", str(tmp_path / "dest"), ok=False)
    assert result.exit_code == 1 and "damaged" in result.stderr


def test_prune_input_errors(built: Any) -> None:
    where, _, _ = built["local"]
    for args in (["prune", *where], ["prune", "support/bob", "--all", *where]):
        result = run(*args, ok=False)
        assert result.exit_code == 1 and result.stderr.strip() == "error: give one thread id or --all"


def test_prune_dry_run_apply_and_gc(tmp_path: Path) -> None:
    url = str(tmp_path / "a")
    archive = sample_archive.build(url, compact=True)
    before = {t: [i.checkpoint_id for i in archive.list(t)] for t in sample_archive.THREADS}
    dry = run_json("prune", "support/bob", "--keep-last", "3", "--dry-run", "--url", url)
    assert dry["dry_run"] is True and dry["totals"]["removed"] == 10 and dry["totals"]["kept"] == 3
    assert dry["totals"]["objects_freed"] > 0 and dry["totals"]["bytes_freed"] > 0
    assert [i.checkpoint_id for i in ca.open_archive(url).list("support/bob")] == before["support/bob"]
    every = run_json("prune", "--all", "--max-age", "30d", "--url", url)  # --all: a dry run by default
    assert every["dry_run"] is True and every["totals"]["threads"] == 3
    by_thread = {r["thread_id"]: r for r in every["threads"]}
    assert len(by_thread["support/alice"]["kept"]) == 1  # 40 days old: only the newest stays
    assert by_thread["support/bob"]["removed"] == [] and by_thread["research 42"]["removed"] == []
    assert {t: [i.checkpoint_id for i in ca.open_archive(url).list(t)] for t in sample_archive.THREADS} == before

    done = run_json("prune", "support/bob", "--keep-last", "3", "--url", url)  # one thread: applied
    assert done["dry_run"] is False and done["totals"]["removed"] == 10
    after = ca.open_archive(url)
    assert [i.checkpoint_id for i in after.list("support/bob")] == before["support/bob"][-3:]
    assert run_json("verify", "--url", url)["ok"] is True
    gc = run_json("gc", "--grace", "0s", "--unsafe-no-writers", "--url", url)
    assert gc["objects_deleted"] > 0 and gc["errors"] == []
    assert run_json("verify", "--url", url)["verified"] == 55 - 10
    text = run("prune", "--all", "--keep-last", "1", "--url", url).stdout
    assert "dry run, nothing deleted" in text


def test_prune_on_s3_with_config_defaults(archive_url: Any, tmp_path: Path) -> None:
    url, opts = archive_url("s3")
    sample_archive.build(url, opts, compact=True, only=("support/bob",))
    config = s3_config(tmp_path / "s3.toml", url, opts)
    config.write_text(config.read_text() + "[retention]\nkeep_last = 4\n")
    out = run_json("prune", "support/bob", "--config", str(config))  # policy from the config file
    assert out["totals"]["kept"] == 4 and out["totals"]["removed"] == 9 and "keep_last(4)" in out["policy"]
    assert len(ca.open_archive(url, storage_options=opts).list("support/bob")) == 4
    bad = run("prune", "support/bob", "--config", str(config), "--max-age", "soon", ok=False)
    assert bad.exit_code == 1 and "not a duration" in bad.stderr
