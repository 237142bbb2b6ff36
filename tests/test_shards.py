"""Shards of a whole-archive operation: one membership rule, ``--shard i/n`` parsed in one place."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import Result
from hypothesis import given
from hypothesis import strategies as st
from typer.testing import CliRunner

import ckpt_archive as ca
from ckpt_archive.cli import app
from ckpt_archive.retention import in_shard, parse_shard


@given(st.lists(st.text(min_size=1), unique=True, max_size=60), st.integers(min_value=1, max_value=9))
def test_shards_partition_threads(threads: list[str], n: int) -> None:
    parts = [{t for t in threads if in_shard(t, (i, n))} for i in range(n)]
    assert set().union(*parts) == set(threads)
    assert sum(len(p) for p in parts) == len(threads)  # pairwise disjoint


def test_membership_is_stable() -> None:
    # A hash of the id (sha256), not Python's salted hash(): these never change across runs or machines.
    assert [i for i in range(4) if in_shard("support/alice", (i, 4))] == [
        i for i in range(4) if in_shard("support/alice", (i, 4))
    ]
    assert sum(in_shard("support/alice", (i, 4)) for i in range(4)) == 1


@pytest.mark.parametrize(("text", "want"), [("0/1", (0, 1)), ("2/3", (2, 3)), (" 1/4 ", (1, 4))])
def test_parse_shard(text: str, want: tuple[int, int]) -> None:
    assert parse_shard(text) == want


@pytest.mark.parametrize("text", ["3/2", "0/0", "x", "1", "-1/2", "1/2/3", "a/b", ""])
def test_parse_shard_rejects(text: str) -> None:
    with pytest.raises(ValueError, match="shard must be i/n") as e:
        parse_shard(text)
    assert "\n" not in str(e.value)


def _archive(tmp_path: Path) -> tuple[str, list[str]]:
    url = str(tmp_path / "arch")
    archive = ca.open_archive(url)
    threads = [f"user-{i}" for i in range(12)]
    for t in threads:
        for step in range(3):
            archive.save(ca.Checkpoint.new(t, {"turn": step}, step=step))
    return url, threads


def _run(*args: str) -> Result:
    return CliRunner().invoke(app, list(args), env={"COLUMNS": "80"})


def test_cli_prune_shards_match_one_unsharded_run(tmp_path: Path) -> None:
    url, threads = _archive(tmp_path)
    whole = json.loads(_run("prune", "--all", "--keep-last", "1", "--url", url, "--json").stdout)
    seen: list[str] = []
    for i in range(3):
        r = _run("prune", "--all", "--keep-last", "1", "--shard", f"{i}/3", "--url", url, "--json", "--apply")
        assert r.exit_code == 0, r.output
        seen += [t["thread_id"] for t in json.loads(r.stdout)["threads"]]
    assert sorted(seen) == sorted(threads) == sorted(t["thread_id"] for t in whole["threads"])
    assert len(seen) == len(set(seen))
    archive = ca.open_archive(url)
    assert all(len(archive.list(t)) == 1 for t in threads)


@pytest.mark.parametrize("bad", ["3/2", "0/0", "x"])
def test_cli_bad_shard_is_one_line(tmp_path: Path, bad: str) -> None:
    url, _ = _archive(tmp_path)
    r = _run("prune", "--all", "--shard", bad, "--url", url)
    assert r.exit_code == 2
    assert "shard must be i/n" in r.output
