from __future__ import annotations

import os

# gcsfs probes for HNS buckets over gRPC (60 s per call against the emulator) unless told not to;
# the variable is read when gcsfs is imported, so it is set before anything imports it.
os.environ["GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT"] = "false"

import fcntl
import itertools
import shutil
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings

import ckpt_archive as ca
from ckpt_archive.testing import AzuriteServer, GCSServer, S3Server

# The suite runs in parallel (pytest-xdist) on a machine other work shares: an example's wall time says
# nothing about the code under test. No per-example deadline (a slow example is not a failure, nor an
# "unreliable timing" one), no health check on slow data generation; what each test asserts is unchanged.
settings.register_profile("suite", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("suite")

_bucket_ids = itertools.count()


@pytest.fixture(scope="session")
def s3_server() -> Iterator[S3Server]:
    server = S3Server().start()
    yield server
    server.stop()


@pytest.fixture
def s3_url(s3_server: S3Server) -> str:
    return s3_server.make_bucket(f"bucket-{next(_bucket_ids)}") + "/archive"


@pytest.fixture(scope="session")
def gcs_server() -> Iterator[GCSServer]:
    server = GCSServer().start()
    yield server
    server.stop()


AZURITE_DIR = Path(__file__).resolve().parent.parent / ".azurite"
AZURITE_BIN = AZURITE_DIR / "node_modules" / ".bin" / "azurite-blob"


def azurite_binary() -> str:
    """The project-local azurite-blob, installed with npm on first use (``make azurite`` does the same);
    under a lock, so parallel test workers never run two installs into one folder."""
    if AZURITE_BIN.exists():
        return str(AZURITE_BIN)
    if shutil.which("node") is None or shutil.which("npm") is None:
        pytest.skip("Azure tests need Node.js and npm (for Azurite); neither node nor npm is on PATH")
    AZURITE_DIR.mkdir(exist_ok=True)
    with open(AZURITE_DIR / ".install.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        if AZURITE_BIN.exists():  # another worker installed it meanwhile
            return str(AZURITE_BIN)
        if not (AZURITE_DIR / "package.json").exists():
            (AZURITE_DIR / "package.json").write_text('{"name": "azurite-local", "private": true}\n')
        subprocess.run(
            ["npm", "install", "--no-audit", "--no-fund", "--silent", "azurite@3"],
            cwd=AZURITE_DIR,
            check=True,
            timeout=600,
        )
    return str(AZURITE_BIN)


@pytest.fixture(scope="session")
def azure_server() -> Iterator[AzuriteServer]:
    server = AzuriteServer(azurite_binary()).start()
    yield server
    server.stop()


BACKENDS = ["local", "memory", "s3", "gcs", "azure"]
_SERVERS = {"s3": "s3_server", "gcs": "gcs_server", "azure": "azure_server"}


@pytest.fixture
def archive_url(request: pytest.FixtureRequest, tmp_path: Any) -> Callable[..., tuple[str, dict[str, Any]]]:
    """A factory of fresh archive URLs (with storage options) for a backend name."""

    def make(backend: str) -> tuple[str, dict[str, Any]]:
        if backend == "local":
            return str(tmp_path / f"archive-{next(_bucket_ids)}"), {}
        if backend == "memory":
            return f"memory://archive-{next(_bucket_ids)}", {}
        server: S3Server | GCSServer | AzuriteServer = request.getfixturevalue(_SERVERS[backend])
        return server.make_bucket(f"bucket-{next(_bucket_ids)}") + "/archive", server.storage_options()

    return make


def open_backend(make: Callable[..., tuple[str, dict[str, Any]]], backend: str, **kw: Any) -> ca.ArchiveCheckpointer:
    url, opts = make(backend)
    return ca.open_archive(url, storage_options=opts, **kw)


@pytest.fixture
def validated_messages(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The ids of the LangChain messages the saver validates from now on (``values.decode_message``,
    the one place a stored message becomes an object), in order: what the memo tests count."""
    from ckpt_archive.integrations.langgraph import values

    seen: list[str] = []
    real = values.decode_message

    def counting(cell: dict[str, Any], where: str, **kw: Any) -> Any:
        seen.append(str(cell.get("id")))
        return real(cell, where, **kw)

    monkeypatch.setattr(values, "decode_message", counting)
    return seen
