"""Real test servers on loopback, for our tests and benchmarks (needs the ``dev`` extra).

``S3Server`` is moto's S3 served over real HTTP by werkzeug, wrapped in a WSGI
middleware that counts requests by method, so request economy is measured at
the server rather than assumed.
"""

from __future__ import annotations

import socket
import threading
from collections import Counter
from collections.abc import Callable, Iterable
from typing import Any


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class S3Server:
    """moto S3 over HTTP on 127.0.0.1 with a request counter."""

    region = "eu-west-1"

    def __init__(self) -> None:
        self.port = free_port()
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self.requests: Counter[str] = Counter()
        self.log: list[tuple[str, str]] = []
        self._lock = threading.Lock()
        self._server: Any = None
        self._thread: threading.Thread | None = None

    def _count(self, app: Callable[..., Iterable[bytes]]) -> Callable[..., Iterable[bytes]]:
        def wrapped(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
            method = environ["REQUEST_METHOD"]
            query = environ.get("QUERY_STRING", "")
            kind = "LIST" if method == "GET" and ("list-type" in query or "prefix=" in query) else method
            with self._lock:
                self.requests[kind] += 1
                self.log.append((kind, environ.get("PATH_INFO", "")))
            return app(environ, start_response)

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
        self._server = make_server(
            "127.0.0.1", self.port, self._count(app), threaded=True, request_handler=MotoRequestHandler
        )
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


class RoundTrips:
    """Counts sequential round trips of an async fsspec filesystem, client side.

    A request's depth is 1 + the deepest request that had *completed* before it
    started; requests issued together share a depth. ``depth`` is the number of
    sequential round trips since ``reset()``.
    """

    _METHODS = ("_cat_file", "_pipe_file", "_ls", "_rm", "_find", "_info", "_rm_file")

    def __init__(self, fs: Any) -> None:
        self.depth = 0
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
                return await fn(*args, **kwargs)
            finally:
                self._completed = max(self._completed, depth)
                self.depth = max(self.depth, depth)

        return wrapped
