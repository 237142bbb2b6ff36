"""The stores compared by the peer benchmarks, behind one small interface.

Each adapter saves a plain ``dict`` state per step of a thread and reads it back the way a user of that
store would: ckpt_archive's native API, its LangGraph ``ArchiveSaver`` (when installed), LangGraph's
``InMemorySaver`` and ``SqliteSaver``, ``langgraph-checkpoint-objectstorage`` with zstd on, and a naive
"one JSON file per step" baseline on fsspec.

Run as a script it is the *fresh-process reader*: it opens the store anew and times load-latest,
list-all and list(limit=1), each with a fresh store object, printing JSON. On S3 it reads a marker
object after each operation so the parent can split the server's request log per operation:

    python benchmarks/peers.py STORE URL OPTS_JSON THREAD [MARKER_PREFIX]
"""

from __future__ import annotations

import gc
import importlib
import json
import sqlite3
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import fsspec
import orjson

STORES = ["native", "ArchiveSaver", "objectstorage-zstd", "SqliteSaver", "InMemorySaver", "naive-json"]
S3_STORES = ["native", "ArchiveSaver", "objectstorage-zstd", "naive-json"]  # the others cannot use S3


MODULES = {
    "native": "ckpt_archive",
    "ArchiveSaver": "ckpt_archive.integrations.langgraph",
    "objectstorage-zstd": "langgraph_checkpoint_objectstorage",
    "SqliteSaver": "langgraph.checkpoint.sqlite",
    "InMemorySaver": "langgraph.checkpoint.memory",
    "naive-json": "orjson",
    "PostgresSaver": "langgraph.checkpoint.postgres",  # needs a server: bench_postgres.py starts one
}


def available(name: str) -> bool:
    """Whether the store's package is installed (the peers come with the ``bench`` extra)."""
    try:
        importlib.import_module(MODULES[name])
    except ImportError:
        return False
    return True


def has_retention() -> bool:
    try:
        from ckpt_archive import RetentionPolicy  # noqa: F401
    except ImportError:
        return False
    return True


def fs_bytes(fs: fsspec.AbstractFileSystem, root: str) -> int:
    try:
        return sum(int(i["size"]) for i in fs.find(root, detail=True).values())
    except FileNotFoundError:
        return 0


class Store:
    """save/load/list one thread's states; threads(); prune(keep) every thread; bytes stored."""

    def save(self, thread: str, step: int, state: dict[str, Any]) -> None:
        raise NotImplementedError

    def load(self, thread: str) -> dict[str, Any]:
        raise NotImplementedError

    def list(self, thread: str, limit: int | None = None) -> int:
        raise NotImplementedError

    def threads(self) -> int:
        raise NotImplementedError

    def prune(self, keep: int) -> None:
        raise NotImplementedError

    def gc(self) -> None:
        """Collect garbage left by prune, where the store has such a step (ours)."""

    def maintain(self) -> None:
        """A user's maintenance run, where the store has one (ours: ``compact`` every thread, which merges
        its segments by tier, then gc); otherwise gc alone."""
        self.gc()

    def nbytes(self) -> int:
        raise NotImplementedError

    def close(self) -> None:
        pass


class Native(Store):
    """``ckpt_archive.open_archive`` (snapshot every 10 steps, deltas between)."""

    def __init__(self, url: str, opts: dict[str, Any]) -> None:
        import ckpt_archive as ca

        self.ca = ca
        self.url, self.opts = url, opts
        self.archive = ca.open_archive(url, storage_options=opts, full_snapshot_interval=10)

    def save(self, thread: str, step: int, state: dict[str, Any]) -> None:
        self.archive.save(self.ca.Checkpoint.new(thread, state, step=step))

    def load(self, thread: str) -> dict[str, Any]:
        latest = self.archive.load(thread)
        assert latest is not None
        return latest.state

    def list(self, thread: str, limit: int | None = None) -> int:
        return len(self.archive.list(thread)[:limit])  # the native list has no limit argument

    def threads(self) -> int:
        return len(self.archive.threads())

    def prune(self, keep: int) -> None:
        from ckpt_archive import RetentionPolicy  # type: ignore[attr-defined]

        self.archive.prune_all(RetentionPolicy.keep_last(keep))  # type: ignore[attr-defined]

    def gc(self) -> None:
        self.archive.gc(grace=timedelta(0), unsafe_no_writers=True)  # type: ignore[attr-defined]

    def maintain(self) -> None:
        for thread in self.archive.threads():
            self.archive.compact(thread)
        self.gc()

    def nbytes(self) -> int:
        fs, root = fsspec.core.url_to_fs(self.url, **self.opts)
        return fs_bytes(fs, root)


class NaiveJson(Store):
    """One JSON file per step: ``<root>/<thread>/<step:08d>.json`` holding the full state."""

    def __init__(self, url: str, opts: dict[str, Any]) -> None:
        self.fs, self.root = fsspec.core.url_to_fs(url, **opts)
        self.local = "file" in self.fs.protocol
        self._dirs: set[str] = set()

    def save(self, thread: str, step: int, state: dict[str, Any]) -> None:
        folder = f"{self.root}/{thread}"
        if self.local and folder not in self._dirs:
            self.fs.makedirs(folder, exist_ok=True)
            self._dirs.add(folder)
        self.fs.pipe_file(f"{folder}/{step:08d}.json", orjson.dumps(state))

    def _files(self, thread: str) -> list[str]:
        return sorted(self.fs.ls(f"{self.root}/{thread}", detail=False))

    def load(self, thread: str) -> dict[str, Any]:
        state: dict[str, Any] = orjson.loads(self.fs.cat_file(self._files(thread)[-1]))
        return state

    def list(self, thread: str, limit: int | None = None) -> int:
        files = self._files(thread)
        return len(files[-limit:] if limit else files)

    def threads(self) -> int:
        return len(self.fs.ls(self.root, detail=False))

    def prune(self, keep: int) -> None:
        for folder in self.fs.ls(self.root, detail=False):
            old = sorted(self.fs.ls(folder, detail=False))[:-keep]
            if old:
                self.fs.rm(old)

    def nbytes(self) -> int:
        return fs_bytes(self.fs, self.root)


class LangGraphStore(Store):
    """Any LangGraph ``BaseCheckpointSaver``, fed checkpoints whose channels are the state's keys."""

    def __init__(self, saver: Any) -> None:
        self.saver = saver
        self._head: dict[str, tuple[str | None, dict[str, Any], dict[str, Any]]] = {}

    @staticmethod
    def config(thread: str, checkpoint_id: str | None = None) -> dict[str, Any]:
        conf: dict[str, Any] = {"thread_id": thread, "checkpoint_ns": ""}
        if checkpoint_id:
            conf["checkpoint_id"] = checkpoint_id
        return {"configurable": conf}

    def save(self, thread: str, step: int, state: dict[str, Any]) -> None:
        from langgraph.checkpoint.base.id import uuid6

        parent, versions, previous = self._head.get(thread, (None, {}, {}))
        changed = [k for k, v in state.items() if previous.get(k) != v]
        versions = dict(versions)
        for key in changed:
            versions[key] = self.saver.get_next_version(versions.get(key), None)
        checkpoint = {
            "v": 4,
            "id": str(uuid6(clock_seq=step)),
            "ts": datetime.now(UTC).isoformat(),
            "channel_values": state,
            "channel_versions": versions,
            "versions_seen": {},
            "updated_channels": changed,
        }
        metadata = {"source": "loop", "step": step, "parents": {}}
        out = self.saver.put(self.config(thread, parent), checkpoint, metadata, {k: versions[k] for k in changed})
        self._head[thread] = (out["configurable"]["checkpoint_id"], versions, state)

    def load(self, thread: str) -> dict[str, Any]:
        found = self.saver.get_tuple(self.config(thread))
        assert found is not None
        return dict(found.checkpoint["channel_values"])

    def list(self, thread: str, limit: int | None = None) -> int:
        return sum(1 for _ in self.saver.list(self.config(thread), limit=limit))


class InMemory(LangGraphStore):
    def __init__(self) -> None:
        from langgraph.checkpoint.memory import InMemorySaver

        super().__init__(InMemorySaver())

    def threads(self) -> int:
        return len(self.saver.storage)

    def prune(self, keep: int) -> None:
        for namespaces in self.saver.storage.values():
            for checkpoints in namespaces.values():
                for cid in sorted(checkpoints)[:-keep]:
                    del checkpoints[cid]

    def nbytes(self) -> int:
        total = sum(len(b[1]) for b in self.saver.blobs.values())
        for namespaces in self.saver.storage.values():
            for checkpoints in namespaces.values():
                total += sum(len(c[0][1]) + len(c[1][1]) for c in checkpoints.values())
        return total + sum(len(w[2][1]) for writes in self.saver.writes.values() for w in writes.values())


class Sqlite(LangGraphStore):
    def __init__(self, path: str) -> None:
        from langgraph.checkpoint.sqlite import SqliteSaver

        self.path = path
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        self.conn = sqlite3.connect(path, check_same_thread=False)
        super().__init__(SqliteSaver(self.conn))

    def threads(self) -> int:
        self.saver.setup()
        return len(self.conn.execute("SELECT DISTINCT thread_id FROM checkpoints").fetchall())

    def prune(self, keep: int) -> None:
        with self.conn:
            for table in ("writes", "checkpoints"):
                self.conn.execute(
                    f"DELETE FROM {table} WHERE (thread_id, checkpoint_ns, checkpoint_id) NOT IN ("
                    " SELECT thread_id, checkpoint_ns, checkpoint_id FROM (SELECT thread_id, checkpoint_ns,"
                    " checkpoint_id, row_number() OVER (PARTITION BY thread_id, checkpoint_ns"
                    " ORDER BY checkpoint_id DESC) AS r FROM checkpoints) WHERE r <= ?)",
                    (keep,),
                )

    def nbytes(self) -> int:
        self.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        return sum(p.stat().st_size for p in Path(self.path).parent.glob(Path(self.path).name + "*"))

    def close(self) -> None:
        self.conn.close()


class ObjectStorage(LangGraphStore):
    def __init__(self, url: str, opts: dict[str, Any]) -> None:
        from langgraph_checkpoint_objectstorage import ObjectStorageSaver

        saver = ObjectStorageSaver.from_conn_string(url, compression="zstd", **opts)
        super().__init__(saver)
        self.fs, self.root = saver.fs, saver.root

    def threads(self) -> int:
        return len(self.fs.ls(self.root, detail=False))

    def prune(self, keep: int) -> None:  # what a user of this saver would write: it has no prune
        for folder in self.fs.ls(self.root, detail=False):
            old = sorted(self.fs.find(f"{folder}/checkpoints/"))[:-keep]
            if not old:
                continue
            ids = [key.rsplit("/", 1)[-1].removesuffix(".msgpack") for key in old]
            writes = [f"{folder}/writes/{cid}" for cid in ids if self.fs.exists(f"{folder}/writes/{cid}")]
            self.fs.rm(old + writes, recursive=True)

    def nbytes(self) -> int:
        return fs_bytes(self.fs, self.root)


class Archive(LangGraphStore):
    def __init__(self, url: str, opts: dict[str, Any]) -> None:
        from ckpt_archive.integrations.langgraph import ArchiveSaver

        super().__init__(ArchiveSaver.from_url(url, storage_options=opts))
        self.url, self.opts = url, opts

    def threads(self) -> int:
        return len(self.saver.archive.threads())

    def prune(self, keep: int) -> None:
        from ckpt_archive import RetentionPolicy  # type: ignore[attr-defined]

        self.saver.archive.prune_all(RetentionPolicy.keep_last(keep))

    def gc(self) -> None:
        self.saver.archive.gc(grace=timedelta(0), unsafe_no_writers=True)

    def close(self) -> None:
        self.saver.close()  # puts the idle hint and an owed fold now, not into a directory being removed

    def maintain(self) -> None:
        for thread in self.saver.archive.threads():
            self.saver.archive.compact(thread)
        self.gc()

    def nbytes(self) -> int:
        fs, root = fsspec.core.url_to_fs(self.url, **self.opts)
        return fs_bytes(fs, root)


class Postgres(LangGraphStore):
    """LangGraph's ``PostgresSaver`` on one database (``url`` is its DSN), set up on open."""

    TABLES = ("checkpoints", "checkpoint_blobs", "checkpoint_writes")

    def __init__(self, dsn: str) -> None:
        from langgraph.checkpoint.postgres import PostgresSaver
        from psycopg import Connection
        from psycopg.rows import dict_row

        # what PostgresSaver.from_conn_string opens, without its context manager
        self.conn = Connection.connect(dsn, autocommit=True, prepare_threshold=0, row_factory=dict_row)
        super().__init__(PostgresSaver(self.conn))
        self.saver.setup()

    def threads(self) -> int:
        return len(self.conn.execute("SELECT DISTINCT thread_id FROM checkpoints").fetchall())

    def prune(self, keep: int) -> None:
        raise NotImplementedError("not measured on Postgres")

    def nbytes(self) -> int:
        """Heap, TOAST and indexes of the saver's tables, as they stand (dead rows and free space included)."""
        sizes = " + ".join(f"pg_total_relation_size('{t}')" for t in self.TABLES)
        row = self.conn.execute(f"SELECT {sizes} AS n").fetchone()
        assert row is not None
        return int(row["n"])

    def vacuum_full(self) -> None:
        for table in self.TABLES:
            self.conn.execute(f"VACUUM FULL {table}")

    def close(self) -> None:
        self.conn.close()


def open_store(name: str, url: str, opts: dict[str, Any]) -> Store:
    """``url`` is a directory or s3:// prefix (SqliteSaver puts its database file inside it); for
    PostgresSaver, a database's DSN."""
    if name == "native":
        return Native(url, opts)
    if name == "naive-json":
        return NaiveJson(url, opts)
    if name == "InMemorySaver":
        return InMemory()
    if name == "SqliteSaver":
        return Sqlite(f"{url}/checkpoints.db")
    if name == "objectstorage-zstd":
        return ObjectStorage(url, opts)
    if name == "ArchiveSaver":
        return Archive(url, opts)
    if name == "PostgresSaver":
        return Postgres(url)
    raise ValueError(f"unknown store {name!r}")


def messages_in(state: dict[str, Any]) -> int:
    return len(state.get("messages", ()))


def _shared_fs(store: str, url: str, opts: dict[str, Any]) -> fsspec.AbstractFileSystem:
    """The cached S3 filesystem instance the store's reads go through. Ours opens it with botocore's
    retries off (``ckpt_archive.storage.open_store``), so fsspec caches it apart from the peers' own
    (a counter on the peers' instance saw none of our requests: round trips read 0)."""
    if store in ("native", "ArchiveSaver"):
        from ckpt_archive.storage import open_store as open_object_store

        fs = open_object_store(url, opts).fs
        assert fs is not None
        return fs
    return fsspec.filesystem("s3", **opts)


def fresh_read(store: str, url: str, opts: dict[str, Any], thread: str, marker: str | None) -> dict[str, Any]:
    """Time load-latest, list-all and list(limit=1), each on a newly opened store object.

    Not timed: a full garbage collection before each read (the first one after the imports walks
    every object of the process, ~70 ms here, and would land in whichever read crosses its threshold:
    benchmarks/bench_first_read.py), importing the store's modules and, on S3, opening the HTTP
    client (a throwaway store object is opened and a marker read first; the stores then share
    fsspec's cached S3 filesystem, on which ``FsspecRoundTrips`` counts the sequential round trips
    of each operation, client side).
    """
    opts = {**opts, "skip_instance_cache": False} if opts else opts
    open_store(store, url, opts).close()
    mark_fs = _shared_fs(store, url, opts) if marker else None
    trips = None
    if mark_fs is not None:
        from ckpt_archive.testing import FsspecRoundTrips

        mark_fs.cat_file(f"{marker}/warm")
        trips = FsspecRoundTrips(mark_fs)  # the stores share this cached filesystem instance
    out: dict[str, Any] = {}
    for op in ("load", "list", "list1"):
        if trips is not None:
            trips.reset()
        gc.collect()  # the full collection the imports left owed lands in no store's timed read
        t0 = time.perf_counter()
        s = open_store(store, url, opts)
        if op == "load":
            out["messages"] = messages_in(s.load(thread))
        else:
            out["n_" + op] = s.list(thread, 1 if op == "list1" else None)
        out[op] = time.perf_counter() - t0
        s.close()
        if trips is not None:
            out[f"rt_{op}"] = trips.depth
        if mark_fs is not None:
            mark_fs.cat_file(f"{marker}/{op}")
    return out


def main() -> None:
    store, url, opts, thread = sys.argv[1], sys.argv[2], json.loads(sys.argv[3]), sys.argv[4]
    marker = sys.argv[5] if len(sys.argv) > 5 and sys.argv[5] else None
    print(json.dumps(fresh_read(store, url, opts, thread, marker)))


if __name__ == "__main__":
    main()
