"""Backend failures surface as typed StorageErrors with a one-line message that says what to do, from
the store layer; bad input is refused before anything is written.

Full disk and read-only mount are real (a tiny tmpfs, remounted read-only), skipped where mounting
is not allowed; S3 cases run against moto over HTTP, or a closed port.
"""

from __future__ import annotations

import base64
import os
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

import ckpt_archive as ca
from ckpt_archive.cli import app
from ckpt_archive.testing import S3Server


@pytest.fixture
def tmpfs(tmp_path: Path) -> Iterator[Path]:
    """A 256 KiB tmpfs (root only); unmounted afterwards."""
    where = tmp_path / "mnt"
    where.mkdir()
    try:
        subprocess.run(
            ["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(where)], check=True, capture_output=True
        )
    except (OSError, subprocess.CalledProcessError) as exc:
        pytest.skip(f"cannot mount a tmpfs here: {exc}")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False, capture_output=True)


def noise(n: int) -> str:
    return base64.b64encode(os.urandom(n)).decode()  # barely compressible


def one_line(exc: BaseException) -> str:
    text = str(exc)
    assert text and "\n" not in text
    return text


def test_full_disk_is_storage_full_and_commits_nothing(tmpfs: Path) -> None:
    url = str(tmpfs / "archive")
    cp = ca.open_archive(url)
    small = ca.Checkpoint.new("t", {"a": 1})
    cp.save(small)
    with pytest.raises(ca.StorageFull, match="no space left") as caught:
        cp.save(ca.Checkpoint.new("t", {"big": noise(400_000)}, step=1))
    assert "free space" in one_line(caught.value)
    assert [i.checkpoint_id for i in ca.open_archive(url).list("t")] == [small.checkpoint_id]


def test_read_only_mount_is_read_only_storage_and_reads_work(tmpfs: Path) -> None:
    url = str(tmpfs / "archive")
    saved = ca.Checkpoint.new("t", {"a": 1})
    ca.open_archive(url).save(saved)
    subprocess.run(["mount", "-o", "remount,ro", str(tmpfs)], check=True, capture_output=True)
    cp = ca.open_archive(url)
    assert cp.load("t").state == saved.state  # type: ignore[union-attr]
    with pytest.raises(ca.ReadOnlyStorage, match="read-only") as caught:
        cp.save(ca.Checkpoint.new("t", {"a": 2}, step=1))
    one_line(caught.value)


def test_missing_bucket_is_bucket_not_found(s3_server: S3Server) -> None:
    cp = ca.open_archive("s3://never-created-bucket/archive", storage_options=s3_server.storage_options())
    with pytest.raises(ca.BucketNotFound, match="'never-created-bucket' does not exist: create it"):
        cp.save(ca.Checkpoint.new("t", {"a": 1}))
    with pytest.raises(ca.BucketNotFound):
        ca.open_archive("s3://never-created-bucket/archive", storage_options=s3_server.storage_options()).load("t")


@pytest.fixture
def no_aws_credentials(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in list(os.environ):
        if name.startswith("AWS_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")  # no instance metadata probe
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))


def test_s3_without_credentials_is_credentials_missing(
    s3_url: str, s3_server: S3Server, no_aws_credentials: None
) -> None:
    opts = {k: v for k, v in s3_server.storage_options().items() if k not in ("key", "secret")}
    cp = ca.open_archive(s3_url, storage_options=opts)
    with pytest.raises(ca.CredentialsMissing, match="no credentials") as caught:
        cp.load("t")
    assert "storage_options" in one_line(caught.value)


@pytest.fixture
def closed_port() -> Iterator[int]:
    """A loopback port that refuses connections for the whole test: bound here and never listened on,
    so no other process (a parallel test worker's server) can take it meanwhile."""
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        yield int(held.getsockname()[1])


def unreachable(s3_server: S3Server, port: int) -> dict[str, Any]:
    opts = s3_server.storage_options()
    opts["client_kwargs"] = {**opts["client_kwargs"], "endpoint_url": f"http://127.0.0.1:{port}"}
    return opts


def test_unreachable_endpoint_fails_typed_within_seconds(s3_server: S3Server, closed_port: int) -> None:
    for action in (
        lambda cp: cp.save(ca.Checkpoint.new("t", {"a": 1})),
        lambda cp: cp.load("t"),
    ):
        started = time.monotonic()
        with pytest.raises(ca.StorageUnavailable, match="check the endpoint") as caught:
            action(ca.open_archive("s3://somewhere/archive", storage_options=unreachable(s3_server, closed_port)))
        assert time.monotonic() - started < 15
        one_line(caught.value)


def test_an_oversized_step_is_refused_before_anything_is_written(tmp_path: Path) -> None:
    with pytest.raises(ca.InvalidState, match="step"):
        ca.Checkpoint.new("t", {"a": 1}, step=2**70)
    url = str(tmp_path / "archive")
    cp = ca.open_archive(url)
    bad = ca.Checkpoint.new("t", {"a": 1}).model_copy(update={"step": 2**70})  # past the model's validation
    with pytest.raises(ca.InvalidState, match="step"):
        cp.save(bad)
    with pytest.raises(ca.InvalidState, match="attempts"):
        cp.save(ca.Checkpoint.new("t", {"a": 1}).model_copy(update={"attempts": {"n": -(2**64)}}))
    assert not Path(url).exists() or not any(Path(url).rglob("*"))  # no payload, no orphan


def cli(*args: str) -> Any:
    result = CliRunner().invoke(app, list(args), env={"COLUMNS": "200"})
    assert result.exit_code == 1, (result.output, result.exception)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    assert "unexpected" not in lines[0] and "Traceback" not in result.output + result.stderr
    return lines[0]


def test_cli_says_what_to_do_for_storage_errors(tmp_path: Path, s3_server: S3Server, closed_port: int) -> None:
    readme = tmp_path / "README.md"
    readme.write_text("# not an archive\n")
    assert "is a file: point the archive URL at a folder" in cli("threads", "--url", str(readme))
    endpoint = unreachable(s3_server, closed_port)["client_kwargs"]["endpoint_url"]
    config = tmp_path / "s3.toml"
    config.write_text(
        'url = "s3://somewhere/archive"\n[storage_options]\nkey = "testing"\nsecret = "testing"\n'
        f'client_kwargs = {{ endpoint_url = "{endpoint}", region_name = "eu-west-1" }}\n'
    )
    started = time.monotonic()
    assert "check the endpoint and the network" in cli("threads", "--config", str(config))
    assert time.monotonic() - started < 15
