"""The checkpointer contract (``ckpt_archive.testing.contract``) on every checkpointer here: memory (the
reference), delta-over-memory, and the archive on each backend."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import pytest

import ckpt_archive as ca
from ckpt_archive.testing.contract import CheckpointerContract

ARCHIVE_BACKENDS = ["local", "memory", "s3", "gcs", "azure"]


class TestMemory(CheckpointerContract):
    snapshot_interval = None

    @pytest.fixture
    def cp(self) -> ca.Checkpointer:
        return ca.MemoryCheckpointer()


class TestDeltaOverMemory(CheckpointerContract):
    @pytest.fixture
    def cp(self) -> ca.Checkpointer:
        return ca.DeltaCheckpointer(ca.MemoryCheckpointer(), ca.DeltaConfig(full_snapshot_interval=4))


class TestArchive(CheckpointerContract):
    @pytest.fixture(params=ARCHIVE_BACKENDS)
    def cp(self, request: pytest.FixtureRequest, archive_url: Any) -> ca.Checkpointer:
        url, opts = archive_url(request.param)
        return ca.open_archive(url, storage_options=opts, full_snapshot_interval=4)


# -- the Checkpoint model itself (no checkpointer involved) ----------------------------------------
def test_empty_thread_id_refused() -> None:
    with pytest.raises(ca.InvalidIdentifier):
        ca.Checkpoint.new("", {})


def test_non_json_state_refused_naming_key() -> None:
    with pytest.raises(ca.InvalidState, match="when"):
        ca.Checkpoint.new("t", {"when": datetime.now()})
    with pytest.raises(ca.InvalidState, match="nan"):
        ca.Checkpoint.new("t", {"x": float("nan")})
    with pytest.raises(ca.InvalidState, match="not a string"):
        ca.Checkpoint.new("t", {"x": {1: "a"}})


def test_reserved_metadata_refused() -> None:
    with pytest.raises(ca.ReservedMetadataKey):
        ca.Checkpoint.new("t", {}).with_metadata("ckpt_archive.delta", 1)
