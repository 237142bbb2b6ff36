"""What every command shares: the archive options, output (rich or JSON), progress and errors."""

from __future__ import annotations

import contextlib
import json
import sys
from collections.abc import Iterator
from dataclasses import asdict, is_dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Annotated, Any

import typer
from pydantic import BaseModel
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeElapsedColumn
from rich.table import Column, Table

from ..analysis.frames import require_archive
from ..archive import ArchiveCheckpointer
from ..errors import CheckpointError
from ..retention import parse_shard
from ..settings import ArchiveSettings

app = typer.Typer(
    name="ckpt-archive",
    help="Inspect, analyse and maintain a ckpt_archive archive on any fsspec URL.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

UrlOpt = Annotated[str | None, typer.Option("--url", "-u", help="Archive URL (path, s3://, gs://, az://, memory://).")]
ConfigOpt = Annotated[
    Path | None, typer.Option("--config", "-c", help="TOML settings file (CKPT_ARCHIVE_* variables win).")
]
FLAG = ""  # the metavar of a boolean flag: shown in help as a plain flag, not `<bool>`
JsonOpt = Annotated[bool, typer.Option("--json", metavar=FLAG, help="Machine-readable JSON on stdout.")]
DebugOpt = Annotated[bool, typer.Option("--debug", metavar=FLAG, help="Show the traceback of an error.")]


def _version(value: bool) -> None:
    if value:
        from importlib.metadata import PackageNotFoundError, version

        try:
            number = version("ckpt-archive")
        except PackageNotFoundError:
            number = "unknown (not installed)"
        sys.stdout.write(f"ckpt-archive {number}\n")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool,
        typer.Option("--version", metavar=FLAG, callback=_version, is_eager=True, help="Print the version and exit."),
    ] = False,
) -> None:
    """Inspect, analyse and maintain a ckpt_archive archive on any fsspec URL."""


def _shard(value: str | None) -> tuple[int, int] | None:
    if value is None:
        return None
    try:
        return parse_shard(value)
    except ValueError as e:
        raise typer.BadParameter(str(e)) from None


ShardOpt = Annotated[
    str | None,
    typer.Option("--shard", metavar="I/N", callback=_shard, help="Only shard I of N (threads split by id hash)."),
]


class Fail(Exception):
    """A one-line error for the user (bad input); exit status 1."""


def settings(url: str | None, config: Path | None) -> ArchiveSettings:
    return ArchiveSettings.load(config, url=url)


def open_from(s: ArchiveSettings, *, create: bool = False) -> ArchiveCheckpointer:
    """The archive of the settings; unless ``create``, it must exist (a typo is an error, not an empty list)."""
    archive = s.open(create=create)
    if not create:
        require_archive(archive)
    return archive


def to_jsonable(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if is_dataclass(value) and not isinstance(value, type):
        return to_jsonable(asdict(value))
    if isinstance(value, dict):
        return {str(k): to_jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [to_jsonable(v) for v in value]
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, timedelta):
        return value.total_seconds()
    return value


def emit_json(data: Any) -> None:
    sys.stdout.write(json.dumps(to_jsonable(data), indent=2, ensure_ascii=False) + "\n")


def out() -> Console:
    return Console(highlight=False, soft_wrap=True)


def err() -> Console:
    return Console(stderr=True, highlight=False, soft_wrap=True)


class Ticker:
    """``tick()`` advances the bar by one; ``tick.set(done, total)`` moves it to a known position."""

    def __init__(self, bar: Progress, task: TaskID) -> None:
        self.bar, self.task = bar, task

    def __call__(self) -> None:
        self.bar.advance(self.task)

    def set(self, done: int, total: int) -> None:
        self.bar.update(self.task, completed=done, total=total)


@contextlib.contextmanager
def progress(description: str, total: int | None) -> Iterator[Ticker]:
    """A rich progress bar on stderr (hidden when stderr is not a terminal)."""
    console = err()
    bar = Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        transient=True,
        disable=not console.is_terminal,
    )
    with bar:
        yield Ticker(bar, bar.add_task(description, total=total))


# Python spellings in library messages, and what a CLI user types instead.
_CLI_WORDS = (
    ("gc(grace=..., unsafe_no_writers=True)", "gc --grace ... --unsafe-no-writers"),
    ("unsafe_no_writers=True", "--unsafe-no-writers"),
    ("unsafe_no_writers", "--unsafe-no-writers"),
    ("encryption_key=", "encryption_key in the --config file (or CKPT_ARCHIVE_ENCRYPTION_KEY) "),
)


def cli_words(message: str) -> str:
    """A library message with its Python keyword arguments named as the CLI's flags."""
    for python, flag in _CLI_WORDS:
        if python in message:
            message = message.replace(python, flag)
            if python.startswith("unsafe"):
                break
    return message


@contextlib.contextmanager
def guarded(debug: bool) -> Iterator[None]:
    """Turn every error into one line on stderr and a non-zero exit (the traceback with --debug)."""
    try:
        yield
    except (typer.Exit, typer.Abort):
        raise
    except Exception as exc:
        if debug:
            raise
        if isinstance(exc, Fail | CheckpointError | ValueError | LookupError):
            message = str(exc)
        elif isinstance(exc, FileNotFoundError | PermissionError):
            message = f"{type(exc).__name__}: {exc}"
        elif isinstance(exc, ImportError):
            message = f"a dependency is missing: {exc} (install ckpt-archive with the right extra)"
        else:
            message = f"unexpected {type(exc).__name__}: {exc} (run again with --debug for the traceback)"
        message = cli_words(message)
        first = message.strip().splitlines()[0] if message.strip() else type(exc).__name__
        err().print(f"error: {first}", markup=False)
        raise typer.Exit(1) from None


def idcol(header: str) -> Column:
    """A table column for ids: folded onto more lines when narrow, never cut short (no ellipsis)."""
    return Column(header, overflow="fold")


def show_table(table: Table, console: Console | None = None) -> None:
    """A rich table on a terminal; piped (stdout not a terminal): plain text, a header line then one
    tab-separated line a row, nothing wrapped or cut."""
    console = console or out()
    if console.is_terminal:
        console.print(table)
        return
    lines = ["\t".join(str(c.header) for c in table.columns)]
    cells = [[str(cell) for cell in c._cells] for c in table.columns]
    lines += ["\t".join(row) for row in zip(*cells, strict=True)]
    sys.stdout.write("".join(line + "\n" for line in lines))


def human_bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TiB"
