"""ArchiveSettings: TOML file, CKPT_ARCHIVE_* environment (wins), clear errors; the example configs."""

from __future__ import annotations

import os
from datetime import timedelta
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

import ckpt_archive as ca
from ckpt_archive.settings import ArchiveSettings, ConfigError, parse_duration

CONFIG_DIR = Path(__file__).resolve().parent.parent / "config"


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.upper().startswith("CKPT_ARCHIVE_"):
            monkeypatch.delenv(name)


def write(tmp_path: Path, text: str, name: str = "c.toml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_toml_values(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        'url = "s3://b/p"\nfull_snapshot_interval = 4\ngc_grace = "2h"\n'
        '[storage_options]\nanon = true\n[retention]\nkeep_last = 3\nmax_age = "30d"\n',
    )
    s = ArchiveSettings.load(path)
    assert s.url == "s3://b/p" and s.full_snapshot_interval == 4 and s.storage_options == {"anon": True}
    assert s.gc_grace == timedelta(hours=2)
    assert s.retention.keep_last == 3 and s.retention.max_age == timedelta(days=30)


def test_environment_wins_over_toml_and_arguments_over_both(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = write(
        tmp_path, 'url = "/from/toml"\nfull_snapshot_interval = 4\n[retention]\nkeep_last = 3\nmax_age = "1d"\n'
    )
    monkeypatch.setenv("CKPT_ARCHIVE_FULL_SNAPSHOT_INTERVAL", "7")
    monkeypatch.setenv("CKPT_ARCHIVE_RETENTION__KEEP_LAST", "9")
    monkeypatch.setenv("CKPT_ARCHIVE_STORAGE_OPTIONS", '{"profile": "prod"}')
    s = ArchiveSettings.load(path)
    assert s.full_snapshot_interval == 7 and s.url == "/from/toml"
    assert s.retention.keep_last == 9 and s.retention.max_age == timedelta(days=1)  # nested merge
    assert s.storage_options == {"profile": "prod"}
    monkeypatch.setenv("CKPT_ARCHIVE_URL", "/from/env")
    assert ArchiveSettings.load(path).url == "/from/env"
    assert ArchiveSettings.load(path, url="/from/arg").url == "/from/arg"
    assert ArchiveSettings.load(None).url == "/from/env"  # no file: environment only


@pytest.mark.parametrize(
    ("text", "field"),
    [
        ('url = "x"\nfull_snapshot_interval = 0\n', "full_snapshot_interval"),
        ('url = "x"\nbogus = 1\n', "bogus"),
        ('url = "x"\n[retention]\nkeep_last = -1\n', "retention.keep_last"),
        ('url = "x"\n[retention]\nmax_age = "soon"\n', "retention.max_age"),
        ('url = "x"\nencryption_key = "hunter2"\n', "encryption_key"),
        ('url = "x"\ngc_grace = "5 years"\n', "gc_grace"),
        ("full_snapshot_interval = 3\n", "URL"),
    ],
)
def test_bad_config_names_the_field_and_the_file(tmp_path: Path, text: str, field: str) -> None:
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as info:
        ArchiveSettings.load(path)
    message = str(info.value)
    assert field in message
    if field != "URL":
        assert str(path) in message
    assert isinstance(info.value, ca.CheckpointError)


def test_bad_environment_value_names_the_variable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = write(tmp_path, 'url = "x"\n')
    monkeypatch.setenv("CKPT_ARCHIVE_CONCURRENCY", "lots")
    with pytest.raises(ConfigError, match=r"CKPT_ARCHIVE_CONCURRENCY.*concurrency"):
        ArchiveSettings.load(path)


def test_unreadable_files(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="does not exist"):
        ArchiveSettings.load(tmp_path / "missing.toml")
    broken = write(tmp_path, "url = [unclosed\n")
    with pytest.raises(ConfigError, match="not valid TOML") as info:
        ArchiveSettings.load(broken)
    assert str(broken) in str(info.value)


@pytest.mark.parametrize("name", ["local", "s3", "gcs", "azure", "memory"])
def test_example_configs_load(name: str) -> None:
    s = ArchiveSettings.load(CONFIG_DIR / f"{name}.toml")
    prefix = {
        "local": str(CONFIG_DIR.parent / "demo-archive"),
        "s3": "s3://",
        "gcs": "gs://",
        "azure": "az://",
        "memory": "memory://",
    }[name]
    assert s.url.startswith(prefix)
    assert s.full_snapshot_interval >= 1 and s.retention.keep_last is not None
    text = (CONFIG_DIR / f"{name}.toml").read_text()
    assert text.lstrip().startswith("#")  # each example explains itself


def test_settings_open_the_archive(tmp_path: Path) -> None:
    path = write(tmp_path, f'url = "{tmp_path / "a"}"\nfull_snapshot_interval = 2\n')
    archive = ArchiveSettings.load(path).open()
    for step in range(3):
        archive.save(ca.Checkpoint.new("t", {"n": step}, step=step))
    assert archive.full_snapshot_interval == 2
    assert [i.kind for i in archive.list("t")] == ["full", "delta", "full"]


@given(st.integers(min_value=0, max_value=10**6), st.sampled_from(["s", "m", "h", "d", "w"]))
def test_parse_duration(n: int, unit: str) -> None:
    seconds = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}[unit]
    assert parse_duration(f"{n}{unit}") == timedelta(seconds=n * seconds)
    assert parse_duration(f" {n} {unit.upper()} ") == timedelta(seconds=n * seconds)


@pytest.mark.parametrize("bad", ["", "d", "3 days", "-1d", "1y", True, None])
def test_parse_duration_rejects(bad: object) -> None:
    with pytest.raises(ValueError):
        parse_duration(bad)


def test_relative_url_resolves_against_the_config_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    conf_dir = tmp_path / "conf"
    conf_dir.mkdir()
    path = write(conf_dir, 'url = "data/archive"\n')
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    s = ArchiveSettings.load(path)
    assert Path(s.url) == (conf_dir / "data" / "archive").resolve()
    # Absolute paths and URLs are left as written; an environment URL is not rebased.
    assert ArchiveSettings.load(write(conf_dir, 'url = "s3://b/p"\n', "s3.toml")).url == "s3://b/p"
    monkeypatch.setenv("CKPT_ARCHIVE_URL", "rel/from-env")
    assert ArchiveSettings.load(path).url == "rel/from-env"
