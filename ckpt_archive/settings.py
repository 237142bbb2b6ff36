"""Configuration: ``ArchiveSettings`` from a TOML file and ``CKPT_ARCHIVE_*`` environment variables.

Precedence, highest first: keyword arguments, environment variables, the TOML
file, defaults. Nested fields use ``__`` in variable names
(``CKPT_ARCHIVE_RETENTION__KEEP_LAST=5``); ``storage_options`` is read from the
environment as JSON (``CKPT_ARCHIVE_STORAGE_OPTIONS='{"anon": true}'``).

A bad value raises ``ConfigError`` naming the field and where it came from
(the file, or the environment variable that set it).
"""

from __future__ import annotations

import base64
import binascii
import os
import re
import tomllib
from collections.abc import Mapping
from datetime import timedelta
from pathlib import Path
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from .archive import ArchiveCheckpointer, Encryption, open_archive
from .engine.root import HINT_EVERY
from .errors import CheckpointError

ENV_PREFIX = "CKPT_ARCHIVE_"
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(s|m|h|d|w)\s*$", re.IGNORECASE)
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
_KEY_REF = re.compile(r"^(env|file|kms|vault):.+$")


class ConfigError(CheckpointError, ValueError):
    """A configuration file or variable is unreadable or holds a bad value."""


def parse_duration(value: Any) -> timedelta:
    """``"30d"``, ``"12h"``, ``"90m"``, ``"45s"``, ``"2w"``, seconds as a number, or a timedelta."""
    if isinstance(value, timedelta):
        return value
    if isinstance(value, bool):
        raise ValueError(f"not a duration: {value!r}")
    if isinstance(value, int | float):
        return timedelta(seconds=value)
    if isinstance(value, str):
        m = _DURATION.match(value)
        if m:
            return timedelta(seconds=float(m.group(1)) * _UNITS[m.group(2).lower()])
    raise ValueError(f"not a duration: {value!r} (use e.g. 30d, 12h, 90m, 45s, 2w)")


class RetentionDefaults(BaseModel):
    """The policy ``ckpt-archive prune`` applies when no ``--keep-last``/``--max-age`` is given."""

    model_config = ConfigDict(extra="forbid")

    keep_last: int | None = Field(default=None, ge=1)
    max_age: timedelta | None = None

    @field_validator("max_age", mode="before")
    @classmethod
    def _age(cls, v: Any) -> Any:
        return None if v is None else parse_duration(v)


class ArchiveSettings(BaseSettings):
    """Where the archive lives and how to treat it."""

    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX, env_nested_delimiter="__", extra="forbid", case_sensitive=False
    )
    _toml_path: ClassVar[Path | None] = None

    url: str = Field(min_length=1)
    storage_options: dict[str, Any] = Field(default_factory=dict)
    full_snapshot_interval: int = Field(default=10, ge=1)
    hint_every: int = Field(default=HINT_EVERY, ge=1)  # the writer's head hint policy (``open_archive``)
    single_writer: bool = False
    retention: RetentionDefaults = Field(default_factory=RetentionDefaults)
    gc_grace: timedelta | None = None  # the archive's (its marker's); given, only a new archive takes it
    encryption_key: str | None = None
    concurrency: int = Field(default=8, ge=1, le=256)

    @field_validator("gc_grace", mode="before")
    @classmethod
    def _grace(cls, v: Any) -> Any:
        return None if v is None else parse_duration(v)

    @field_validator("encryption_key")
    @classmethod
    def _key_ref(cls, v: str | None) -> str | None:
        if v is not None and not _KEY_REF.match(v):
            raise ValueError("must be a reference (env:NAME, file:PATH, kms:ARN or vault:PATH), never the key")
        return v

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        sources: list[PydanticBaseSettingsSource] = [init_settings, env_settings]
        if cls._toml_path is not None:
            sources.append(_TomlSource(settings_cls, cls._toml_path))
        return tuple(sources)

    @classmethod
    def load(cls, path: str | Path | None = None, **overrides: Any) -> ArchiveSettings:
        """Settings from ``path`` (TOML) if given, the environment, and ``overrides`` (highest)."""
        toml = Path(path) if path is not None else None
        if toml is not None and not toml.is_file():
            raise ConfigError(f"config file {str(toml)!r} does not exist")
        bound = type(cls.__name__, (cls,), {"_toml_path": toml, "__module__": cls.__module__})
        try:
            settings = bound(**{k: v for k, v in overrides.items() if v is not None})
        except ValidationError as exc:
            raise ConfigError(_explain(exc, toml)) from None
        assert isinstance(settings, cls)
        return settings

    def open(
        self, *, create: bool = False, defaults: Mapping[str, Any] | None = None, **options: Any
    ) -> ArchiveCheckpointer:
        """The archive these settings describe (``create``: as in ``open_archive``). ``defaults``:
        values of ``full_snapshot_interval`` and ``hint_every`` for settings that leave them unset
        (the LangGraph saver's own); ``options``: ``open_archive``'s others (``hint_idle``,
        ``probe_window``)."""
        unset = {k: v for k, v in (defaults or {}).items() if k not in self.model_fields_set}
        return open_archive(
            self.url,
            storage_options=self.storage_options or None,
            full_snapshot_interval=unset.get("full_snapshot_interval", self.full_snapshot_interval),
            hint_every=unset.get("hint_every", self.hint_every),
            single_writer=self.single_writer,
            gc_grace=self.gc_grace,
            encryption=self.encryption(),
            create=create,
            **options,
        )

    def encryption(self) -> Encryption | None:
        """The key ``encryption_key`` refers to, or None without one.

        ``env:NAME``: the variable NAME holds the key (base64 of 32 bytes), under key id ``NAME``;
        ``file:PATH``: the file holds it (base64, or the 32 bytes), under the file's name as key id.
        The key id is stored in every record, so keep the name when the key rotates under it. ``kms:``
        and ``vault:`` keys need their client in code: ``open_archive(url, encryption=Encryption(...))``.
        """
        ref = self.encryption_key
        if ref is None:
            return None
        scheme, _, where = ref.partition(":")
        if scheme == "env":
            if where not in os.environ:
                raise ConfigError(f"field 'encryption_key': environment variable {where} (the key) is not set")
            raw, key_id = os.environ[where].encode(), where
        elif scheme == "file":
            try:
                raw, key_id = Path(where).read_bytes(), Path(where).name
            except OSError as exc:
                raise ConfigError(f"field 'encryption_key': key file {where!r} cannot be read: {exc}") from None
        else:
            raise ConfigError(
                f"field 'encryption_key': {scheme}: keys are not fetched from settings; open the archive with "
                "open_archive(url, encryption=Encryption(provider, key_id)) and a provider for them"
            )
        key = raw if scheme == "file" and len(raw) == 32 else _b64(raw.strip())  # raw bytes: a key file only
        if key is None or len(key) != 32 or not key_id:
            raise ConfigError(f"field 'encryption_key': {ref!r} must hold 32 bytes (AES-256), base64-encoded")
        return Encryption({key_id: key}, key_id)


class _TomlSource(PydanticBaseSettingsSource):
    """The whole TOML document (or its ``[ckpt_archive]`` table) as the lowest-priority source."""

    def __init__(self, settings_cls: type[BaseSettings], path: Path) -> None:
        super().__init__(settings_cls)
        try:
            doc = tomllib.loads(path.read_text(encoding="utf-8"))
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"config file {str(path)!r} is not valid TOML: {exc}") from None
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigError(f"config file {str(path)!r} cannot be read: {exc}") from None
        table = doc.get("ckpt_archive", doc)
        if not isinstance(table, dict):
            raise ConfigError(f"config file {str(path)!r}: [ckpt_archive] must be a table")
        url = table.get("url")
        if isinstance(url, str) and url and "://" not in url and not Path(url).is_absolute():
            # A relative local path in a config file means relative to the file, not the working directory.
            table = {**table, "url": os.path.normpath(path.resolve().parent / url)}
        self.data: dict[str, Any] = table

    def get_field_value(self, field: Any, field_name: str) -> tuple[Any, str, bool]:
        return self.data.get(field_name), field_name, False

    def __call__(self) -> dict[str, Any]:
        return dict(self.data)


def _b64(text: bytes) -> bytes | None:
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        return None


def _explain(exc: ValidationError, toml: Path | None) -> str:
    """One line per bad field: the field, the problem, and where the value came from."""
    lines = []
    for err in exc.errors():
        loc = ".".join(str(p) for p in err["loc"]) or "(root)"
        top = str(err["loc"][0]).lower() if err["loc"] else ""
        env_names = [n for n in os.environ if n.lower().startswith((ENV_PREFIX + top).lower())] if top else []
        if env_names:
            where = f"environment variable {sorted(env_names)[0]}"
        elif toml is not None:
            where = f"config file {str(toml)!r}"
        else:
            where = "arguments"
        msg = err["msg"]
        if err["type"] == "missing" and loc == "url":
            lines.append("no archive URL: pass --url or --config, or set CKPT_ARCHIVE_URL")
            continue
        if err["type"] == "missing":
            msg = "required"
        elif err["type"] == "extra_forbidden":
            msg = "not a known setting"
        lines.append(f"{where}: field {loc!r}: {msg}")
    return "; ".join(lines)
