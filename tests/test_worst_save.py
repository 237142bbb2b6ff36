"""The worst single save (issue 20: at most 4 requests) and what a fresh reader pays meanwhile.

A save's compaction (every ``full_snapshot_interval``: snapshot, tier-0 segment, commit) no longer
publishes the fold, the hint and a manifest part in the same save: the writer's next plain save puts
the fold of the compacted manifest and the hint naming it beside its own commit entry (a part, when one
seals, first), so no save pays more than 4 requests, and 3 but where a part seals. Counted at the
moto server, per save, filtered by the test's own bucket (the server is shared),
over W1 steps crossing snapshot, fold, part and hint boundaries; a fresh reader after every save still
finds the latest checkpoint in at most 3 round trips and no LIST, and the log it must read past the
newest fold stays at most ``full_snapshot_interval + 1`` commits (docs/design/005-head-hint.md)."""

from __future__ import annotations

import random
import uuid
from collections import Counter
from typing import Any

import ckpt_archive as ca
from ckpt_archive._sync import run_sync
from ckpt_archive.format import layout
from ckpt_archive.format.manifest import unseal
from ckpt_archive.storage import RoundTrips
from ckpt_archive.testing import S3Server, count_calls

INTERVAL = 10
COLD_DEPTH = 3
"""Round trips of a fresh reader's load: marker and hint, then the log probes with the snapshot and the
segments the hint names (its lists' lineage rows), and the segment a fold's compaction just wrote."""


def w1(steps: int) -> list[dict[str, Any]]:
    """W1 (benchmarks/bench_core.py's shape): a chat growing by one ~1 KB message a step."""
    rng = random.Random(7)
    messages: list[dict[str, Any]] = []
    out = []
    for step in range(steps):
        text = " ".join(rng.choice(["alpha", "beta", "gamma", "delta", "tool", "call"]) for _ in range(160))
        messages.append({"role": "assistant" if step % 2 else "user", "content": text, "id": f"m{step}"})
        out.append({"messages": list(messages), "step": step, "tokens": step * 257})
    return out


def _kinds(log: list[tuple[str, str]], bucket: str) -> list[tuple[str, str]]:
    """(method, kind of object) of the requests to ``bucket`` (other tests share the server)."""
    prefix = f"/{bucket}/"
    return [(m, layout.kind_of(p.split("/", 3)[-1]) or p) for m, p in log if p.startswith(prefix)]


def test_no_save_pays_more_than_four_requests_and_a_fresh_reader_stays_within_three_round_trips(
    s3_server: S3Server,
) -> None:
    """120 W1 saves at interval 10 (12 compactions, 3 part seals, 24 hint boundaries): at most 4
    requests per save (before: 7, a snapshot save writing snapshot, page, segment, commit, hint, part and
    fold), 3 (past the first interval, where the hint's own cadence lands on a snapshot) but for the
    save whose fold seals a part (commit, part, fold, hint);
    a plain save that neither folds nor hints is 1 request; after a save
    around each boundary a fresh reader loads the latest checkpoint in <= 3 round trips with 0 LIST and
    exactly the saved state."""
    bucket = f"worst-{uuid.uuid4().hex[:12]}"
    url = s3_server.make_bucket(bucket) + "/w1"
    opts = s3_server.storage_options()
    archive = ca.open_archive(url, storage_options=opts, full_snapshot_interval=INTERVAL)
    data = w1(121)
    archive.save(ca.Checkpoint.new("chat", data[0], step=0))  # creates the archive: not counted
    per_save: list[list[tuple[str, str]]] = []
    reader = RoundTrips(ca.open_store(url, opts), latency=0.005)  # one client; a new engine (no cache) each read
    for step, state in enumerate(data[1:], 1):
        s3_server.reset_counts()
        archive.save(ca.Checkpoint.new("chat", state, step=step))
        per_save.append(_kinds(list(s3_server.log), bucket))
        if step % INTERVAL in (0, 1, 4, 5, 9):  # a deferred fold and hint, just after them, around a hint
            reader.reset()
            got = ca.ArchiveCheckpointer(reader).load("chat")
            assert got is not None and got.state == state, step
            assert reader.depth <= COLD_DEPTH and reader.requests["list_dir"] == 0, (step, reader.depth, reader.calls)
    counts = [len(s) for s in per_save]
    kinds = Counter(kind for s in per_save for _, kind in s)
    assert kinds["manifest part"] >= 2 and kinds["folded manifest"] >= 11 and "page" not in kinds, kinds
    assert max(counts) <= 4, "\n".join(str((i, s)) for i, s in enumerate(per_save, 1) if len(s) > 4)
    # 3, but where the hint's own cadence (every 10) lands on a snapshot (step 10 only) and
    # where a fold seals a part (the part, then the fold, with the commit and the hint: never a part left
    # for a later save, which gc could collect first: test_gc_between_two_saves_...)
    plain = [n for n, s in zip(counts, per_save, strict=True) if ("PUT", "manifest part") not in s]
    assert max(plain[INTERVAL:]) <= 3, "\n".join(str((i, s)) for i, s in enumerate(per_save, 1) if len(s) > 3)
    # a plain save that neither folds nor hints is its commit entry alone: all but each snapshot's, its
    # fold's and the save after that, whose hint names the fold (the hint's own cadence, every 10, falls
    # there too): 7 of every 10
    assert counts.count(1) >= 80, counts.count(1)
    assert all(m == "PUT" for s in per_save for m, _ in s)  # a save reads nothing


def test_the_log_past_the_newest_fold_stays_bounded(tmp_path: Any) -> None:
    """However the fold is scheduled, a reader rebuilding the manifest reads the newest fold and at most
    ``full_snapshot_interval + 1`` commits after it (counted on local disk after every one of 120 saves)."""
    archive = ca.open_archive(str(tmp_path), full_snapshot_interval=INTERVAL)
    store = ca.open_store(str(tmp_path))
    worst = 0
    for step, state in enumerate(w1(121)):
        archive.save(ca.Checkpoint.new("chat", state, step=step))
        names = run_sync(store.list_dir(layout.log_dir("chat")))
        commits, folds = layout.log_seqs(names)
        worst = max(worst, max(commits) - max(folds, default=0))
    assert worst <= INTERVAL + 1, worst


def test_a_durable_langgraph_call_pays_at_most_1_1_puts(tmp_path: Any) -> None:
    """12 turns of the real tool-using graph (``durability="sync"``: 72 puts, 84 ``put_writes``) with
    ``from_url``'s policy, objects written counted at the store (on S3 each is one PUT-class request:
    ``benchmarks/bench_durable.py`` counts them at moto): at most 1.1 per durable call with the hint the
    burst leaves (before: 1.22, the snapshots' snapshot, segment, fold and hint every 10 puts; now every
    ``SAVER_SNAPSHOT_INTERVAL``, the fold's put carrying the one hint)."""
    from ckpt_archive.integrations.langgraph import ArchiveSaver
    from ckpt_archive.integrations.langgraph.saver import (
        SAVER_HINT_EVERY,
        SAVER_PROBE_WINDOW,
        SAVER_SNAPSHOT_INTERVAL,
    )
    from ckpt_archive.integrations.langgraph.testing import build_graph, run_turns

    trips = RoundTrips(ca.open_store(str(tmp_path)))
    archive = ca.ArchiveCheckpointer(
        trips,
        full_snapshot_interval=SAVER_SNAPSHOT_INTERVAL,
        hint_every=SAVER_HINT_EVERY,
        hint_idle=None,  # the idle timer stands in as flush_hints below: nothing lands mid-count
        probe_window=SAVER_PROBE_WINDOW,
    )
    saver = ArchiveSaver(archive)
    calls = count_calls(saver, ("put", "put_writes"))
    run_turns(build_graph(saver), "t", 0, 12, "sync")
    archive.flush_hints()  # what the burst left: the hint (and a fold a compaction owed)
    written = trips.requests["put"] + trips.requests["create"]
    durable = calls["put"] + calls["put_writes"]
    assert (calls["put"], calls["put_writes"]) == (72, 84), calls
    assert written / durable <= 1.1, (written, durable, trips.requests)


def test_gc_between_two_saves_never_collects_a_part_a_later_fold_names(monkeypatch: Any) -> None:
    """A fold that seals a manifest part writes the part and then the fold in the same save. Found by
    ``TestSmallPartsMachine`` when the part went with one save and its fold with the next: a gc in
    between (grace 0, or an idle writer past the grace) collected the part as unreferenced, the next
    save published a fold naming it, and every reader of the thread then failed with ``MissingObject``."""
    from datetime import timedelta

    from ckpt_archive.format import parts

    monkeypatch.setattr(parts, "PART_SIZE", 3)
    url = f"memory://worst-part-gc-{uuid.uuid4().hex}"
    writer = ca.open_archive(url, full_snapshot_interval=3)
    state: dict[str, Any] = {"log": []}
    ids = []
    for step in range(12):
        state = {**state, "log": [*state["log"], step]} if step % 2 == 0 else {**state, "n": step}
        ids.append(writer.save(ca.Checkpoint.new("a", state, step=step)))
        writer.gc(grace=timedelta(0), unsafe_no_writers=True)
        reader = ca.open_archive(url)
        assert [i.checkpoint_id for i in reader.list("a")] == ids, step
        got = reader.load_by_id(ids[-1])
        assert got is not None and got.state == state


def _hint_named_fold_early(trips: RoundTrips, inner: Any, thread_id: str, folds_before: set[int]) -> bool | None:
    """Did the hint ``trips`` saw put (None: none was put) name a fold that had not landed when the hint
    went out: neither there before (``folds_before``) nor put in a round trip that ended before the
    hint's (``RoundTrips`` depth: requests sent together share one)?"""
    hints = [depth for name, key, depth in trips.calls if name == "put" and key == layout.head_key(thread_id)]
    if not hints:
        return None
    doc = unseal(run_sync(inner.get(layout.head_key(thread_id))), "head hint", thread_id=thread_id, kind="head hint")
    named = doc["manifest_seq"]
    if named is None or named in folds_before:
        return False
    fold = layout.manifest_key(thread_id, named)
    puts = [depth for name, key, depth in trips.calls if name == "put" and key == fold]
    return not puts or min(puts) >= max(hints)


def test_no_head_hint_names_a_fold_before_the_fold_landed() -> None:
    """A save's compaction owes its fold to the writer's next save, which puts it beside its commit; the
    hint naming that fold goes with the save after (``ThreadLog.hint_stale``), and the idle timer,
    ``close`` and ``compact`` put the fold first, then the hint. Before, the hint naming a fold went out
    beside it: a reader (or gc, which keeps the log from the fold the hint names) could be sent to a fold
    not there yet, or never there when its write failed (21 of the 44 hints below did so). Every hint PUT over 210
    W1 saves (interval 10, the default ``hint_every``), a ``compact`` and a ``close`` is checked against
    the order of the requests (``RoundTrips``) and the folds there before."""
    url = f"memory://owed-order-{uuid.uuid4().hex}"
    inner = ca.open_store(url)
    trips = RoundTrips(inner, latency=0.001)  # every round trip costs the same: sent together, same depth
    archive = ca.ArchiveCheckpointer(trips, full_snapshot_interval=INTERVAL)
    early = hints = 0

    def check(action: Any) -> None:
        nonlocal early, hints
        folds_before = set(layout.log_seqs(run_sync(inner.list_dir(layout.log_dir("chat"))))[1])
        trips.reset()
        action()
        verdict = _hint_named_fold_early(trips, inner, "chat", folds_before)
        hints += verdict is not None
        early += bool(verdict)

    for step, state in enumerate(w1(210)):
        check(lambda s=step, st=state: archive.save(ca.Checkpoint.new("chat", st, step=s)))
        if step == 104:
            check(lambda: archive.compact("chat"))
    check(archive.close)
    assert hints >= 20 and early == 0, (hints, early)
    got = ca.open_archive(url).load("chat")
    assert got is not None and got.step == 209


def test_owed_fold_debt_is_cleared_where_a_fold_is_written_or_read_not_by_a_query() -> None:
    """``ThreadLog.owes_fold`` is a query: asking it twice, or of any manifest, changes nothing. The debt
    a save's compaction leaves goes where a fold at or after it lands (the next save's, here) or is read
    (``ThreadLog._folded``); the hint naming that fold is then owed (``hint_stale``) until a hint names it."""
    url = f"memory://owed-query-{uuid.uuid4().hex}"
    archive = ca.open_archive(url, full_snapshot_interval=3)
    log = archive.engine.log
    data = w1(6)
    for step in range(4):  # the 4th save (seq 4) is the compaction of a snapshot interval of 3
        archive.save(ca.Checkpoint.new("chat", data[step], step=step))
    current = log.cached("chat")
    assert current is not None and log.owed == {"chat": current.seq}
    before = (dict(log.owed), set(log.hint_stale), dict(log.folded_seq))
    assert log.owes_fold(current) and log.owes_fold(current)
    assert (dict(log.owed), set(log.hint_stale), dict(log.folded_seq)) == before  # no side effect
    archive.save(ca.Checkpoint.new("chat", data[4], step=4))  # puts the owed fold beside its commit
    assert log.owed == {} and log.hint_stale == {"chat"} and log.folded_seq["chat"] == current.seq
    archive.save(ca.Checkpoint.new("chat", data[5], step=5))  # puts the hint naming it
    assert log.hint_stale == set()
    hint = run_sync(log.read_hint("chat"))
    assert hint is not None and hint["manifest_seq"] == current.seq
    # read: a writer that owed a fold another one put forgets it once it reads that fold
    other = ca.open_archive(url, full_snapshot_interval=3)
    other.engine.log.owed["chat"] = current.seq
    assert run_sync(other.engine.log.manifest("chat")).seq == 6  # rebuilt from the hint's fold
    assert other.engine.log.owed == {} and other.engine.log.folded_seq["chat"] == current.seq


_EXIT_OWING_A_FOLD = """
import sys
import ckpt_archive as ca
archive = ca.open_archive(sys.argv[1], full_snapshot_interval=3)  # no hint_idle: only the exit hook
for step in range(4):  # the 4th save compacts: its fold is owed to a next save that never comes
    archive.save(ca.Checkpoint.new("chat", {"step": step, "log": list(range(step))}, step=step))
assert archive.engine.log.owed == {"chat": 4}, archive.engine.log.owed
"""


def test_a_process_that_exits_owing_a_fold_puts_it_on_its_way_out(tmp_path: Any) -> None:
    """The exit hook puts what every archive that saved still owes, not only those with ``hint_idle``:
    the fold, then the hint naming it. On local disk it used to fail silently: the default executor is
    shut before atexit hooks run (``storage.sync_fs.in_thread`` now writes inline then). A fresh reader
    then finds the hint at the head, naming the fold, and reads no commit before the fold."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    done = subprocess.run(
        [sys.executable, "-c", _EXIT_OWING_A_FOLD, str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        check=False,
    )
    assert done.returncode == 0 and not done.stderr.strip(), done.stderr[-2000:]
    store = ca.open_store(str(tmp_path))
    assert 4 in layout.log_seqs(run_sync(store.list_dir(layout.log_dir("chat"))))[1]
    hint = unseal(run_sync(store.get(layout.head_key("chat"))), "head hint", thread_id="chat", kind="head hint")
    assert (hint["seq"], hint["manifest_seq"]) == (4, 4), hint
    trips = RoundTrips(store)
    got = ca.ArchiveCheckpointer(trips).load("chat")
    assert got is not None and got.step == 3
    before_fold = {layout.log_key("chat", seq) for seq in (1, 2, 3)}
    assert not before_fold & {key for _, key, _ in trips.calls}, trips.calls
