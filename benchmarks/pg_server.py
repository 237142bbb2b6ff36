"""A throwaway PostgreSQL server on loopback, for benchmarking LangGraph's ``PostgresSaver`` against ours.

``PostgresServer()`` is a context manager: a temp data dir, ``initdb`` (trust auth, user ``postgres``), the
server on 127.0.0.1 at a free port with its unix socket in the same temp dir, ready when a connection
succeeds; on exit (error included) ``pg_ctl stop -m fast`` and the temp dir removed. Server settings stay
at initdb's defaults (``fsync`` and ``synchronous_commit`` on), so every commit is durable, as every save
of ours is (temp file + fsync).

Postgres refuses to run as root: with euid 0 the binaries run as the ``postgres`` system user through
``runuser`` (nothing is created by hand; without that user the server is reported missing). ``missing()``
says, in one line, why a server cannot be started here, or returns None.
"""

from __future__ import annotations

import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

PG_BIN = Path(os.environ.get("PG_BIN", "/usr/lib/postgresql/15/bin"))
RUN_AS = "postgres"


def _run_as() -> list[str]:
    return ["runuser", "-u", RUN_AS, "--"] if os.geteuid() == 0 else []


def missing() -> str | None:
    """Why no server can be started (one line, saying what to install), or None."""
    for tool in ("initdb", "pg_ctl", "postgres"):
        if not (PG_BIN / tool).exists():
            return f"PostgreSQL binaries not found in {PG_BIN} (apt-get install postgresql, or set PG_BIN)"
    if os.geteuid() == 0:
        try:
            pwd.getpwnam(RUN_AS)
        except KeyError:
            return f"running as root and no {RUN_AS!r} user to run PostgreSQL as (apt-get install postgresql)"
        if shutil.which("runuser") is None:
            return "running as root and no runuser to drop privileges (apt-get install util-linux)"
    try:
        import langgraph.checkpoint.postgres  # noqa: F401
        import psycopg  # noqa: F401
    except ImportError:
        return "langgraph-checkpoint-postgres / psycopg not installed (pip install 'ckpt-archive[bench]')"
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class PostgresServer:
    """``with PostgresServer() as pg: pg.dsn`` - a fresh, empty cluster for the block's lifetime."""

    def __init__(self, startup_timeout: float = 60.0) -> None:
        self.startup_timeout = startup_timeout
        self.tmp = ""
        self.port = 0

    @property
    def data(self) -> str:
        return f"{self.tmp}/data"

    @property
    def dsn(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def _pg(self, tool: str, *args: str) -> subprocess.CompletedProcess[str]:
        cmd = [*_run_as(), str(PG_BIN / tool), *args]
        return subprocess.run(cmd, check=True, capture_output=True, text=True)

    def start(self) -> PostgresServer:
        reason = missing()
        if reason:
            raise RuntimeError(reason)
        self.tmp = tempfile.mkdtemp(prefix="bench-pg-")
        try:
            if os.geteuid() == 0:
                user = pwd.getpwnam(RUN_AS)
                os.chown(self.tmp, user.pw_uid, user.pw_gid)
            self._pg("initdb", "-D", self.data, "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-instructions")
            self.port = _free_port()
            opts = f"-c listen_addresses=127.0.0.1 -p {self.port} -c unix_socket_directories={self.tmp}"
            self._pg("pg_ctl", "-D", self.data, "-l", f"{self.tmp}/server.log", "-o", opts, "-s", "-w", "start")
            self._wait_ready()
        except BaseException:
            self.stop()
            raise
        return self

    def _wait_ready(self) -> None:
        import psycopg

        deadline = time.monotonic() + self.startup_timeout
        while True:
            try:
                psycopg.connect(self.dsn, connect_timeout=2).close()
                return
            except psycopg.OperationalError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)

    def create_database(self, name: str) -> str:
        """An empty database; returns its DSN (one per run, so each run's tables are measured alone)."""
        import psycopg

        with psycopg.connect(self.dsn, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.dsn.rsplit("/", 1)[0] + f"/{name}"

    def version(self) -> str:
        import psycopg

        with psycopg.connect(self.dsn) as conn:
            row = conn.execute("SHOW server_version").fetchone()
        assert row is not None
        return str(row[0]).split()[0]

    def stop(self) -> None:
        if not self.tmp:
            return
        if Path(self.data, "postmaster.pid").exists():
            subprocess.run([*_run_as(), str(PG_BIN / "pg_ctl"), "-D", self.data, "-m", "fast", "-s", "-w", "stop"])
        shutil.rmtree(self.tmp, ignore_errors=True)
        self.tmp = ""

    def __enter__(self) -> PostgresServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
