"""`make demo` runs its simulation and prints the summary a user expects."""

from __future__ import annotations

from typing import Any

import pytest

import ckpt_archive as ca
from ckpt_archive import demo


def test_demo_small_run(tmp_path: Any, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    real = demo.simulate
    monkeypatch.setattr(demo, "simulate", lambda path: real(path, threads=2, steps=(25, 30)))
    monkeypatch.setenv("COLUMNS", "80")
    target = tmp_path / "demo-archive"
    demo.main([str(target)])
    raw = capsys.readouterr().out
    out = " ".join(raw.split())  # rich wraps lines
    assert "after gc" in out and "DuckDB" in out and "append" in out
    assert "…" not in raw  # at 80 columns every id is whole
    assert "nodes still to run" in out or "no node was left to run" in out
    archive = ca.open_archive(str(target))
    assert len(archive.threads()) == 2
    rows = [line for line in raw.splitlines() if line.startswith("  ") and (" append " in line or " set " in line)]
    assert {line.split()[0] for line in rows} == set(archive.threads())  # every DuckDB row shown
    for thread in archive.threads():
        latest = archive.load(thread)
        assert latest is not None and len(latest.state["messages"]) == latest.step + 1
    demo.main([str(target)])  # re-running replaces its own archive
    (tmp_path / "other").mkdir()
    with pytest.raises(SystemExit, match="not a ckpt_archive archive"):
        demo.main([str(tmp_path / "other")])


def test_demo_archive_backup_after_prune(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """The README's operator session on the demo archive: prune, gc, then export (to an archive and to a
    file) and import; every surviving checkpoint arrives (the export once left only the marker)."""
    from typer.testing import CliRunner

    from ckpt_archive.cli import app

    def run(*args: str) -> None:
        result = CliRunner().invoke(app, list(args))
        assert result.exit_code == 0, (result.output, result.stderr)

    real = demo.simulate
    monkeypatch.setattr(demo, "simulate", lambda path: real(path, threads=2, steps=(25, 30)))
    src = str(tmp_path / "demo-archive")
    demo.main([src])
    thread = "customer-1000/session-0"
    run("prune", thread, "--keep-last", "5", "--url", src)
    run("gc", "--grace", "0s", "--unsafe-no-writers", "--url", src)
    copy, bundle, restored = str(tmp_path / "copy"), str(tmp_path / "all.tar.zst"), str(tmp_path / "restored")
    run("export", "--all", "--to", copy, "--url", src)
    run("export", "--all", "--to", bundle, "--url", src)
    run("import", bundle, "--url", restored)
    source = ca.open_archive(src)
    assert len(source.list(thread)) == 5
    for url in (copy, restored):
        dest = ca.open_archive(url)
        assert dest.threads() == source.threads()
        for t in source.threads():
            assert [(i.checkpoint_id, i.parent_id, i.step, i.created_at, i.metadata) for i in dest.list(t)] == [
                (i.checkpoint_id, i.parent_id, i.step, i.created_at, i.metadata) for i in source.list(t)
            ]
            latest, copied = source.load(t), dest.load(t)
            assert latest is not None and copied is not None and copied.state == latest.state
        assert dest.verify().ok
