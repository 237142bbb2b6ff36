"""Damage that readers survive must still be reported: a deleted newest commit (verify), and a damaged
thread among healthy ones (listing and stats report it and go on with the others)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from typer.testing import CliRunner

import ckpt_archive as ca
from ckpt_archive._sync import run_sync
from ckpt_archive.cli import app
from ckpt_archive.format import layout

LONG = "x" * 300  # its folder is named by the id's sha256, so listing learns the id from the folder's documents


@pytest.fixture(params=["local", "memory"])
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def chat(archive: ca.ArchiveCheckpointer, thread: str, n: int) -> list[ca.Checkpoint]:
    saved = []
    for step in range(n):
        ckpt = ca.Checkpoint.new(thread, {"m": [f"msg {i}" for i in range(step + 1)]}, step=step)
        archive.save(ckpt)
        saved.append(ckpt)
    return saved


def corrupt(archive: ca.ArchiveCheckpointer, key: str) -> None:
    data = run_sync(archive.store.get(key))
    run_sync(archive.store.put(key, data[:-7] + b"garbage"))


def fresh(archive: ca.ArchiveCheckpointer) -> ca.ArchiveCheckpointer:
    return ca.ArchiveCheckpointer(archive.store, full_snapshot_interval=4)


# -- item 6: a deleted newest commit -------------------------------------------------
def test_deleted_newest_commit_is_reported(archive_url: Any, backend: str) -> None:
    url, opts = archive_url(backend)
    archive = ca.open_archive(url, storage_options=opts, full_snapshot_interval=4, hint_every=1)
    saved = chat(archive, "t", 3)  # commit 3 rewrote the hint (a hint with every commit): it names commit 3
    assert archive.verify().ok
    newest = layout.log_key("t", 3)
    run_sync(archive.store.delete([newest]))
    loaded = fresh(archive).load("t")  # readers roll back to commit 2, as they must (the hint is only a hint)
    assert loaded is not None and loaded.checkpoint_id == saved[1].checkpoint_id
    report = fresh(archive).verify()
    assert [(p.kind, p.key, p.checkpoint_id) for p in report.problems] == [
        ("MissingCommit", newest, saved[2].checkpoint_id)
    ]
    message = report.problems[0].message
    assert "crashed" in message and "deleted" in message
    assert issubclass(ca.MissingCommit, ca.MissingObject)


def test_a_trailing_hint_is_not_a_problem(archive_url: Any, backend: str) -> None:
    """A plain delta save leaves the hint behind (the default ``hint_every``): that is normal."""
    url, opts = archive_url(backend)
    archive = ca.open_archive(url, storage_options=opts, full_snapshot_interval=4)
    chat(archive, "t", 2)
    hint = run_sync(fresh(archive).engine.log.read_hint("t"))
    assert hint is not None and hint["seq"] == 1
    assert fresh(archive).verify().ok


# -- item 11: one damaged thread among healthy ones ---------------------------------
def damaged_archive(archive_url: Any, backend: str) -> tuple[str, ca.ArchiveCheckpointer]:
    url, opts = archive_url(backend)
    archive = ca.open_archive(url, storage_options=opts, full_snapshot_interval=4)
    for thread in ("a", "b", "c", LONG):
        chat(archive, thread, 3)
    corrupt(archive, layout.log_key("b", 2))
    corrupt(archive, layout.head_key(LONG))  # the hint is the one document listing used to name it by
    return url, archive


def test_threads_lists_every_thread_despite_damage(archive_url: Any, backend: str) -> None:
    _, archive = damaged_archive(archive_url, backend)
    reader = fresh(archive)
    assert reader.threads() == sorted(["a", "b", "c", LONG])
    assert len(reader.list(LONG)) == 3
    report = reader.verify()
    assert {p.thread_id for p in report.problems} == {"b", LONG}


def cli(*args: str) -> Any:
    return CliRunner().invoke(app, list(args), env={"COLUMNS": "200"})


def test_cli_threads_and_stats_report_the_damaged_thread(archive_url: Any) -> None:
    url, _ = damaged_archive(archive_url, "local")
    for command in ("threads", "stats"):
        result = cli(command, "--url", url, "--json")
        assert result.exit_code == 1, (result.output, result.exception)
        body = json.loads(result.stdout)
        rows = body if command == "threads" else body["threads"]
        by_id = {r["thread_id"]: r for r in rows}
        assert set(by_id) == {"a", "b", "c", LONG}
        assert by_id["a"]["checkpoints"] == 3 and by_id[LONG]["checkpoints"] == 3
        assert by_id["a"]["damaged"] is None
        assert by_id["b"]["damaged"].startswith("CorruptManifest: ") and "\n" not in by_id["b"]["damaged"]
        if command == "stats":
            assert body["total"]["threads"] == 4 and body["total"]["checkpoints"] == 9
            assert body["total"]["damaged"] == 1

        text = cli(command, "--url", url)
        assert text.exit_code == 1
        assert "damaged" in text.stdout and "CorruptManifest" in text.stdout
        assert all(t in text.stdout for t in ("a", "c"))
        assert "1 damaged thread" in text.stderr


def test_a_folder_whose_id_cannot_be_read_is_reported(archive_url: Any, backend: str) -> None:
    """Hint and first commit of a hashed folder both damaged: the other threads are still listed, and
    verify and the CLI listing report the folder (by its name: its id is unknown)."""
    url, archive = damaged_archive(archive_url, backend)
    corrupt(archive, layout.log_key(LONG, 1))
    reader = fresh(archive)
    assert reader.threads() == ["a", "b", "c"]
    report = reader.verify()
    folder = layout.thread_dir(LONG)
    assert report.threads == 4
    assert [p.kind for p in report.problems if p.key and p.key.startswith(folder)] == ["CorruptManifest"]
    if backend == "local":
        result = cli("threads", "--url", url, "--json")
        assert result.exit_code == 1
        rows = {r["thread_id"]: r for r in json.loads(result.stdout)}
        assert set(rows) == {"a", "b", "c", folder} and rows[folder]["damaged"].startswith("CorruptManifest")
