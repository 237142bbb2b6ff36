"""``ArchiveSaver.from_config`` / ``from_settings`` (issue 22): a LangGraph deployment's saver takes the
same config file as the CLI -- storage options, gc grace, encryption key -- where ``from_url`` could not."""

from __future__ import annotations

import base64
import os
from datetime import timedelta
from pathlib import Path

import pytest

pytest.importorskip("langgraph")

from langgraph.checkpoint.base import empty_checkpoint

import ckpt_archive as ca
from ckpt_archive.integrations.langgraph import ArchiveSaver
from ckpt_archive.integrations.langgraph.saver import SAVER_HINT_EVERY, SAVER_SNAPSHOT_INTERVAL


def _put_secret(saver: ArchiveSaver) -> None:
    checkpoint = empty_checkpoint()
    checkpoint["channel_values"] = {"note": "the launch codes"}
    checkpoint["channel_versions"] = {"note": saver.get_next_version(None, None)}
    config = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}
    saver.put(config, checkpoint, {"source": "input", "step": -1}, dict(checkpoint["channel_versions"]))


def test_a_saver_from_a_config_file_has_its_grace_its_key_and_its_relative_url(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TEAM_KEY", base64.b64encode(os.urandom(32)).decode())
    (tmp_path / "conf").mkdir()
    toml = tmp_path / "conf" / "ckpt.toml"
    toml.write_text('url = "../agents"\ngc_grace = "5m"\nencryption_key = "env:TEAM_KEY"\n')
    monkeypatch.chdir(tmp_path / "conf")  # the url is the file's, wherever the process runs
    saver = ArchiveSaver.from_config(toml)
    assert saver.archive.gc_grace == timedelta(minutes=5)
    assert saver.archive.encryption is not None and saver.archive.encryption.active_key_id == "TEAM_KEY"
    # unset in the file: the saver's own defaults, as from_url's
    assert saver.archive.full_snapshot_interval == SAVER_SNAPSHOT_INTERVAL
    assert saver.archive.engine.root.hint_every == SAVER_HINT_EVERY
    _put_secret(saver)
    saver.close()
    stored = [p for p in (tmp_path / "agents").rglob("*") if p.is_file()]
    assert stored and not any(b"launch codes" in p.read_bytes() for p in stored)
    again = ArchiveSaver.from_config(toml)
    got = again.get_tuple({"configurable": {"thread_id": "t", "checkpoint_ns": ""}})
    assert got is not None and got.checkpoint["channel_values"] == {"note": "the launch codes"}
    with pytest.raises(ca.KeyUnavailable):  # without the key nothing is readable
        ArchiveSaver.from_url(str(tmp_path / "agents")).get_tuple({"configurable": {"thread_id": "t"}})


def test_what_the_settings_set_overrides_the_savers_defaults(tmp_path: Path) -> None:
    settings = ca.ArchiveSettings.load(url=str(tmp_path / "a"), full_snapshot_interval=3, hint_every=2)
    saver = ArchiveSaver.from_settings(settings)
    assert saver.archive.full_snapshot_interval == 3
    assert saver.archive.engine.root.hint_every == 2
    with pytest.raises(ca.ConfigError, match="does not exist"):
        ArchiveSaver.from_config(tmp_path / "missing.toml")
