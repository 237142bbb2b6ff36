"""The CLI's output as a new user sees it: piped (plain, one row a line) and at 80 columns on a terminal;
one test runs ``python -m ckpt_archive.cli`` as a subprocess."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from ckpt_archive.cli import app
from tests import sample_archive

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def url(tmp_path_factory: pytest.TempPathFactory, s3_server: Any) -> str:
    local, _ = sample_archive.shared("local", tmp_path_factory.getbasetemp(), s3_server)
    return str(local)


def plain(text: str) -> str:
    return re.sub(r"\x1b\[[0-9;]*m", "", text)


def run(*args: str, terminal: bool = False, ok: bool = True) -> Any:
    env = {"COLUMNS": "80", "TTY_COMPATIBLE": "1" if terminal else "0", "NO_COLOR": "1"}
    result = CliRunner().invoke(app, list(args), env=env)
    if ok:
        assert result.exit_code == 0, (result.output, result.stderr, result.exception)
    return result


def test_piped_history_is_one_row_a_line(url: str) -> None:
    ids = [
        row["checkpoint_id"]
        for row in __import__("json").loads(run("history", "support/alice", "--url", url, "--json").stdout)
    ]
    lines = run("history", "support/alice", "--url", url).stdout.splitlines()
    assert len(lines) == len(ids) + 1
    assert [line.split("\t")[1] for line in lines[1:]] == ids
    limited = run("history", "support/alice", "--url", url, "--limit", "3").stdout.splitlines()
    assert len(limited) == 4 and [line.split("\t")[1] for line in limited[1:]] == ids[-3:]


def test_terminal_at_80_columns_never_cuts_ids(url: str) -> None:
    out = plain(run("threads", "--url", url, terminal=True).stdout)
    assert "support/alice " in out and "support/bob " in out and "support/…" not in out
    assert all(len(line) <= 80 for line in out.splitlines())


def test_show_key_indexes_lists(url: str) -> None:
    assert run("show", "support/bob", "--key", "messages.1.content", "--url", url).stdout.splitlines()[-1] == (
        '"support/bob turn 1"'
    )
    for key, words in (("messages.999.content", "out of range"), ("messages.x", "not an integer")):
        result = run("show", "support/bob", "--key", key, "--url", url, ok=False)
        lines = result.stderr.strip().splitlines()
        assert result.exit_code == 1 and len(lines) == 1 and words in lines[0], result.stderr


def test_help_shows_flags_and_escaped_markup() -> None:
    prune = plain(run("prune", "--help", terminal=True).stdout)
    assert "[retention]" in prune and not [
        line for line in prune.splitlines() if "<bool>" in line and ("--dry-run" in line or "--json" in line)
    ]
    assert "--all" in plain(run("export", "--help", terminal=True).stdout)
    for command in ("export", "compact"):
        assert "default: every" not in plain(run(command, "--help", terminal=True).stdout)


def test_version_through_the_module_as_a_subprocess(url: str) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "80"}
    version = subprocess.run(
        [sys.executable, "-m", "ckpt_archive.cli", "--version"], env=env, capture_output=True, text=True, check=True
    )
    assert version.stdout.startswith("ckpt-archive ")
    piped = subprocess.run(
        [sys.executable, "-m", "ckpt_archive.cli", "history", "support/alice", "--url", url],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    rows = piped.stdout.splitlines()
    assert rows[0].startswith("step\tcheckpoint") and all(len(r.split("\t")) == 7 for r in rows)
