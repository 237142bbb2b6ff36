"""``ckpt-archive``: the command line (typer + rich). Every command takes --url/--config, --json, --debug."""

from __future__ import annotations

from . import check, maintain, read
from ._common import app

__all__ = ["app", "check", "main", "maintain", "read"]


def main() -> None:
    app()
