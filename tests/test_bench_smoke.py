"""The peer benchmark harness runs end to end at tiny sizes (the real run is ``make bench``).

It checks the harness, not speed: every installed store saves, reloads in a fresh process and lists the
same thread, W3 prunes to keep_last 5, and the report is written.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

BENCH = Path(__file__).resolve().parent.parent / "benchmarks"
sys.path.insert(0, str(BENCH))

import pg_server  # noqa: E402
from bench_peers import split_log  # noqa: E402
from bench_postgres import SAVERS, TURN_SAVERS  # noqa: E402
from peers import STORES, available  # noqa: E402


def test_split_log_assigns_requests_to_the_operation_before_each_marker() -> None:
    log = [
        ("GET", "/b/_mark/warm"),
        ("GET", "/b/a/_head.json.zst"),
        ("GET", "/b/a/x"),
        ("HEAD", "/b/_mark/load"),
        ("GET", "/b/_mark/load"),
        ("LIST", "/b"),
        ("GET", "/b/_mark/list"),
    ]
    out = split_log(log, "/b/_mark")
    assert out == {"warm": Counter(), "load": Counter({"GET": 2}), "list": Counter({"LIST": 1})}


def test_peer_benchmark_smoke_local(tmp_path: Path) -> None:
    cmd = [sys.executable, str(BENCH / "bench_peers.py"), "--smoke", "--targets", "local", "--out", str(tmp_path)]
    subprocess.run(cmd, check=True, capture_output=True, text=True, timeout=120)
    data = json.loads((tmp_path / "peers.json").read_text())
    installed = [s for s in STORES if available(s)]
    assert [r["store"] for r in data["w1"]] == installed
    for r in data["w1"]:
        assert r["bytes"] > 0 and r["messages"] == 30 and r["n_list"] == 30 and r["n_list1"] == 1
        assert len(r["saves"]) == 30
    for r in data["w3"]:
        assert r["threads"] == 3 and r["bytes"] > 0
    md = (tmp_path / "peers.md").read_text()
    for store in installed:
        assert f"| {store} |" in md
    assert (tmp_path / "w1_bytes.png").stat().st_size > 1000


def test_peer_benchmark_counts_our_round_trips_on_s3(tmp_path: Path) -> None:
    """The fresh reads' round trips are counted on the filesystem each store reads through (ours opens
    its own S3 instance, botocore retries off: a counter on the peers' one read 0 for us)."""
    stores = ",".join(s for s in ("native", "ArchiveSaver") if available(s))
    cmd = [sys.executable, str(BENCH / "bench_peers.py"), "--smoke", "--targets", "s3", "--stores", stores]
    subprocess.run([*cmd, "--out", str(tmp_path)], check=True, capture_output=True, text=True, timeout=300)
    for r in json.loads((tmp_path / "peers.json").read_text())["w1"]:
        assert r["rt_load"] == 2 and r["rt_list1"] == 2 and r["rt_list"] >= 2, r


def test_save_cpu_benchmark_smoke(tmp_path: Path) -> None:
    cmd = [sys.executable, str(BENCH / "bench_save_cpu.py"), "--steps", "120", "--out", str(tmp_path)]
    subprocess.run(cmd, check=True, capture_output=True, text=True, timeout=120)
    md = (tmp_path / "save_cpu.md").read_text()
    assert "| Checkpoint.new (JSON check), CPU |" in md and "| native save, wall |" in md
    if available("ArchiveSaver"):
        assert "| ArchiveSaver put, wall |" in md


def test_round_trip_benchmark_smoke(tmp_path: Path) -> None:
    cmd = [sys.executable, str(BENCH / "bench_rtt.py"), "--steps", "12", "--latency-ms", "5", "--turns", "2"]
    subprocess.run([*cmd, "--out", str(tmp_path)], check=True, capture_output=True, text=True, timeout=180)
    rows = {r["store"]: r for r in json.loads((tmp_path / "rtt.json").read_text())}
    assert rows["native"]["rt_load"] == 2 and rows["native"]["rt_max"] <= 3, (
        rows
    )  # saves: payloads, commit, fold + hint
    md = (tmp_path / "rtt.md").read_text()
    assert "| native |" in md
    graph = {(r["store"], r["channel"]): r for r in json.loads((tmp_path / "rtt_graph.json").read_text())}
    assert ("ArchiveSaver", "add_messages") in graph and ("ArchiveSaver", "DeltaChannel") in graph, graph
    for r in graph.values():  # the tool graph's turns: 5 puts each, every request counted at the server
        assert r["puts"] == 10 and r["req_turn"] > 0 and r["turn_p50"] > 0, r
    assert "| ArchiveSaver | DeltaChannel |" in md


def test_hint_benchmark_smoke(tmp_path: Path) -> None:
    """The hint policy trades PUTs on saves, never round trips (design note 005): at the default (10) a
    plain delta save is one PUT (two once every 10 commits, one snapshot interval), with a hint on every
    commit two; either way one round trip, a cold load two."""
    cmd = [sys.executable, str(BENCH / "bench_hint.py"), "--steps", "13", "--latency-ms", "2", "--every", "1,10"]
    subprocess.run([*cmd, "--out", str(tmp_path)], check=True, capture_output=True, text=True, timeout=300)
    rows = {r["every"]: r["ops"] for r in json.loads((tmp_path / "hint.json").read_text())}
    every, default = rows[1], rows[10]
    assert 1 <= default["delta save"]["requests"]["PUT"] < 1.2 < every["delta save"]["requests"]["PUT"] == 2
    for ops in (every, default):
        assert ops["delta save"]["rt_max"] == 1 and ops["cold load"]["rt_max"] == 2, ops
    # the save after a snapshot puts the snapshot's fold beside its commit, in its one round trip; the save
    # after that the hint naming the fold (it has landed by then: no hint names a fold not there yet).
    # A hint with every commit: each of them also puts a hint (naming the fold before, at the fold's save)
    for ops, hint in ((every, 1), (default, 0)):
        fold, after = ops["delta save after a snapshot (fold)"], ops["delta save after a fold (hint)"]
        assert fold["requests"]["PUT"] == 2 + hint and fold["rt_max"] == 1, fold
        assert after["requests"]["PUT"] == 2 and after["rt_max"] == 1, after
    # a cold load right after a snapshot save: at most 3 round trips (the hint trails the snapshot, whose
    # objects the reader reads once it finds it past the hint: from the second interval on), 2 with a
    # hint every commit
    assert every["cold load, after a snapshot save"]["rt_max"] == 2
    assert default["cold load, after a snapshot save"]["rt_max"] <= 3
    if available("ArchiveSaver"):  # ArchiveSaver.from_url's policy: one PUT a put, the hint once idle
        idle = next(ops for key, ops in rows.items() if "idle" in str(key))
        assert idle["delta put"]["requests"]["PUT"] == 1, idle
        after = idle["cold get_tuple after idle, pending writes"]
        assert after["rt_max"] <= 3 and after["requests"]["LIST"] == 1, after


def _postgres_bench(tmp_path: Path, env: dict[str, str] | None = None) -> dict[str, Any]:
    cmd = [sys.executable, str(BENCH / "bench_postgres.py"), "--steps", "12", "--repeats", "1", "--turns", "3"]
    cmd += ["--out", str(tmp_path)]
    subprocess.run(cmd, check=True, capture_output=True, text=True, timeout=120, env=env)
    data: dict[str, Any] = json.loads((tmp_path / "postgres.json").read_text())
    return data


@pytest.mark.skipif(not available("ArchiveSaver"), reason="ckpt_archive.integrations.langgraph (langgraph) missing")
def test_postgres_benchmark_smoke(tmp_path: Path) -> None:
    reason = pg_server.missing()
    if reason:
        pytest.skip(reason)
    data = _postgres_bench(tmp_path)
    rows = {(r["store"], r["channel"]): r for r in data["rows"]}
    assert list(rows) == SAVERS
    for r in rows.values():  # the graph's state, rebuilt in a fresh process, has every message
        assert r["messages"] == 12 and r["n_list"] == r["checkpoints"] == 14 and r["n_list1"] == 1
        assert r["bytes"] > 0 and r["bytes_compact"] > 0
    assert rows["PostgresSaver", "DeltaChannel"]["history_writes"] == 12  # no snapshot within 100 updates
    md = (tmp_path / "postgres.md").read_text()
    assert "| PostgresSaver | DeltaChannel |" in md and "| ArchiveSaver | add_messages |" in md
    turns = {(r["store"], r["channel"]): r for r in data["turns"]}  # the tool graph, turn by turn
    assert list(turns) == TURN_SAVERS, turns
    assert all(r["puts"] == 15 and r["turn_p50"] > 0 for r in turns.values()), turns
    assert "tool graph, turn by turn" in md


@pytest.mark.skipif(not available("ArchiveSaver"), reason="ckpt_archive.integrations.langgraph (langgraph) missing")
def test_postgres_benchmark_without_server_says_what_to_install(tmp_path: Path) -> None:
    data = _postgres_bench(tmp_path, {**os.environ, "PG_BIN": str(tmp_path / "no-postgres")})
    assert [r["store"] for r in data["rows"]] == ["ArchiveSaver", "ArchiveSaver"]
    assert [r["store"] for r in data["turns"]] == ["ArchiveSaver", "ArchiveSaver", "InMemorySaver"]
    assert "apt-get install postgresql" in (tmp_path / "postgres.md").read_text()


def test_blob_benchmark_smoke(tmp_path: Path) -> None:
    """A value re-sent in every turn, and the thread's copy, are stored once (bench_blobs.py; issue 20)."""
    cmd = [sys.executable, str(BENCH / "bench_blobs.py"), "--turns", "4", "--image-kb", "128", "--out", str(tmp_path)]
    if available("ArchiveSaver"):
        cmd.append("--langgraph")
    env = {**os.environ, "PYTHONPATH": str(BENCH.parent)}  # this checkout's package, not an installed one
    subprocess.run(cmd, check=True, capture_output=True, text=True, timeout=120, env=env)
    result = json.loads((tmp_path / "blobs.json").read_text())
    native = result["native"]
    assert native["blobs"] == 1 and native["copy"] < 1.5 * result["image_bytes"], result
    if "langgraph" in result:  # the pending writes reference the image's blob too: once as written
        assert result["langgraph"]["turns"] < 1.5 * result["image_bytes"], result


def test_bytes_benchmark_accounts_for_every_byte(tmp_path: Path) -> None:
    """bench_bytes sorts every stored file into a kind, so its totals are the archive's bytes."""
    cmd = [sys.executable, str(BENCH / "bench_bytes.py"), "--steps", "25", "--no-langgraph", "--out", str(tmp_path)]
    subprocess.run(cmd, check=True, capture_output=True, text=True, timeout=120)
    data = json.loads((tmp_path / "bytes.json").read_text())
    rows = {r["store"]: r for r in data["rows"]}
    native = rows["native"]
    assert native["written"]["_log (commits)"]["files"] == 25
    assert {"snapshots", "deltas", "_archive.json"} <= set(native["written"])
    after = sum(v["bytes"] for v in native["after_gc"].values())
    assert 0 < after <= sum(v["bytes"] for v in native["written"].values())
    assert sum(v["bytes"] for v in native["after_maintenance"].values()) > 0  # compact (tier merges) + gc
    assert "| native |" in (tmp_path / "bytes.md").read_text()


def test_cold_load_benchmark_smoke(tmp_path: Path) -> None:
    """bench_cold_load: a fresh reader's load of a thread whose snapshot replays its list reads the
    segments the head hint names with the snapshot, in 2 round trips and no manifest part."""
    cmd = [sys.executable, str(BENCH / "bench_cold_load.py"), "--steps", "45", "--out", str(tmp_path)]
    env = {**os.environ, "PYTHONPATH": str(BENCH.parent)}
    subprocess.run(cmd, check=True, capture_output=True, text=True, timeout=120, env=env)
    (row,) = json.loads((tmp_path / "cold_load.json").read_text())
    for when in ("after_saves", "after_compact_gc"):
        assert row[when]["round_trips"] == 2 and "manifest part" not in row[when]["by_kind"], row
        assert row[when]["by_kind"]["delta segment"] >= 1, row


@pytest.mark.skipif(not available("ArchiveSaver"), reason="ckpt_archive.integrations.langgraph (langgraph) missing")
def test_history_benchmark_smoke(tmp_path: Path) -> None:
    """Requests per ``get_delta_channel_history`` call, counted at a moto server (bench_history.py; issue 21),
    and a newly opened saver's by the distance to the seed, while the writer is busy and once idle."""
    cmd = [sys.executable, str(BENCH / "bench_history.py"), "--turns", "4", "--cold-at", "3", "--out", str(tmp_path)]
    env = {**os.environ, "PYTHONPATH": str(BENCH.parent)}
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, timeout=120, env=env).stdout
    data = json.loads((tmp_path / "history.json").read_text())
    assert data["turns"] == 4 and len(data["warm"]) == 3  # the first turn has no history to read
    assert data["warm_max"] <= 3 and sum(data["cold"].values()) > 0
    (row,) = data["cold_by_distance"]
    assert row["turn"] == 3 and row["idle"]["writes"] == 3 and row["idle"]["kinds"]["hint"] == 1
    assert "cold after 3 turns, writer idle: 3 writes from the seed" in out


@pytest.mark.skipif(not available("ArchiveSaver"), reason="ckpt_archive.integrations.langgraph (langgraph) missing")
def test_durable_call_benchmark_smoke(tmp_path: Path) -> None:
    """PUTs per durable LangGraph call, counted at a moto server (bench_durable.py; issue 20)."""
    cmd = [sys.executable, str(BENCH / "bench_durable.py"), "--turns", "2", "--out", str(tmp_path)]
    env = {**os.environ, "PYTHONPATH": str(BENCH.parent)}
    subprocess.run(cmd, check=True, capture_output=True, text=True, timeout=120, env=env)
    data = json.loads((tmp_path / "durable.json").read_text())
    assert data["put"] > 0 and data["put_writes"] > 0
    assert data["by_kind"]["commit entry"] == data["put"]  # one commit entry per put, nothing else per plain put
    assert data["by_kind"]["langgraph writes"] == data["put_writes"]  # one object per put_writes call
    assert data["puts_with_idle_hint"] == sum(data["by_kind"].values())


@pytest.mark.skipif(not available("ArchiveSaver"), reason="ckpt_archive.integrations.langgraph (langgraph) missing")
def test_turn_benchmark_smoke(tmp_path: Path) -> None:
    """Thread-pool jobs a LangGraph turn on local disk, by saver method (bench_turn.py; issue 21): the
    tool graph's 5 puts and 4 put_writes a turn, each at least one job; a warm get_tuple (called alone:
    its attribution is exact) is one job, its probe and its listing batched (``sync_fs.Batched``)."""
    cmd = [sys.executable, str(BENCH / "bench_turn.py"), "--turns", "6", "--out", str(tmp_path)]
    env = {**os.environ, "PYTHONPATH": str(BENCH.parent)}
    subprocess.run(cmd, check=True, capture_output=True, text=True, timeout=120, env=env)
    data = json.loads((tmp_path / "turn_local.json").read_text())
    by = data["by_method"]
    assert data["measured_turns"] == 3 and data["wall_ms_per_turn"] > 0
    assert by["put"]["calls_per_turn"] == 5 and by["put_writes"]["calls_per_turn"] == 4
    assert by["get_tuple"] == {"calls_per_turn": 1.0, "jobs_per_turn": 1.0}
    assert data["jobs_per_turn"] >= 5 + 4 + 1  # each put and put_writes writes at least one file
