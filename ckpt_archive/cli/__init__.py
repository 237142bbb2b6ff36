"""``ckpt-archive``: the command line (typer + rich). Every command takes --url/--config, --json, --debug."""

from __future__ import annotations

from . import maintain, read
from ._common import app

__all__ = ["app", "main", "maintain", "read"]


def main() -> None:
    app()
