"""`make demo` runs its simulation and prints the summary a user expects."""

from __future__ import annotations

from typing import Any

import pytest

import ckpt_archive as ca
from ckpt_archive import demo


def test_demo_small_run(tmp_path: Any, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    real = demo.simulate
    monkeypatch.setattr(demo, "simulate", lambda path: real(path, threads=2, steps=(25, 30)))
    target = tmp_path / "demo-archive"
    demo.main([str(target)])
    out = " ".join(capsys.readouterr().out.split())  # rich wraps lines
    assert "after gc" in out and "DuckDB" in out and "append" in out
    archive = ca.open_archive(str(target))
    assert len(archive.threads()) == 2
    for thread in archive.threads():
        latest = archive.load(thread)
        assert latest is not None and len(latest.state["messages"]) == latest.step + 1
    demo.main([str(target)])  # re-running replaces its own archive
    (tmp_path / "other").mkdir()
    with pytest.raises(SystemExit, match="not a ckpt_archive archive"):
        demo.main([str(tmp_path / "other")])
