"""Commands that change an archive or copy from it: compact, prune, gc, export, import."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from ..archive import ArchiveCheckpointer
from ..retention import RetentionPolicy
from ..settings import ArchiveSettings, parse_duration
from ..transfer import copy_threads, is_portable, read_portable, replay, write_portable
from ._common import (
    ConfigOpt,
    DebugOpt,
    Fail,
    JsonOpt,
    ShardOpt,
    UrlOpt,
    app,
    emit_json,
    guarded,
    human_bytes,
    idcol,
    open_from,
    out,
    progress,
    settings,
    show_table,
    to_jsonable,
)

ThreadsArg = Annotated[
    list[str] | None,
    typer.Argument(help="Thread ids (or --all for every thread; one of the two is needed).", show_default=False),
]
AllOpt = Annotated[bool, typer.Option("--all", metavar="", help="Every thread of the archive.")]


def pick_threads(archive: ArchiveCheckpointer, threads: list[str] | None, all_threads: bool) -> list[str]:
    if threads and all_threads:
        raise Fail("give thread ids or --all, not both")
    if not threads and not all_threads:
        raise Fail("give at least one thread id, or --all")
    if all_threads:
        return archive.threads()
    assert threads is not None
    known: set[str] = set(archive.threads())
    missing = [t for t in threads if t not in known]
    if missing:
        raise Fail(f"thread {missing[0]!r} is not in {archive.url!r}")
    return threads


@app.command()
def compact(
    threads: ThreadsArg = None,
    all_threads: AllOpt = False,
    url: UrlOpt = None,
    config: ConfigOpt = None,
    json: JsonOpt = False,
    debug: DebugOpt = False,
) -> None:
    """Close open segments: move inline deltas to Parquet now (so open_dataset/DuckDB see them)."""
    with guarded(debug):
        archive = open_from(settings(url, config))
        names = pick_threads(archive, threads, all_threads)
        done: dict[str, bool] = {}
        with progress("compacting", len(names)) as tick:
            for t in names:
                done[t] = archive.compact(t)
                tick()
        if json:
            return emit_json(
                {
                    "compacted": [t for t, d in done.items() if d],
                    "unchanged": [t for t, d in done.items() if not d],
                }
            )
        n = sum(done.values())
        out().print(f"compacted {n} thread(s); {len(done) - n} had no open segment")


def build_policy(s: ArchiveSettings, keep_last: int | None, max_age: str | None) -> Any:
    policy_cls = RetentionPolicy
    keep = keep_last if keep_last is not None else s.retention.keep_last
    age = parse_duration(max_age) if max_age is not None else s.retention.max_age
    if keep is not None and keep < 1:
        raise Fail("--keep-last must be at least 1")
    parts = []
    if keep is not None:
        parts.append(policy_cls.keep_last(keep))
    if age is not None:
        parts.append(policy_cls.max_age(age))
    if not parts:
        raise Fail("give --keep-last and/or --max-age (or set [retention] in the config)")
    policy = parts[0]
    for p in parts[1:]:
        policy = policy | p
    return policy


def _count(value: Any) -> int:
    return int(value) if isinstance(value, int) else len(value)


@app.command()
def prune(
    thread: Annotated[str | None, typer.Argument(help="Thread id (or --all).")] = None,
    all_threads: AllOpt = False,
    keep_last: Annotated[int | None, typer.Option("--keep-last", help="Keep the newest N checkpoints.")] = None,
    max_age: Annotated[
        str | None, typer.Option("--max-age", help="Keep checkpoints younger than this (30d, 12h).")
    ] = None,
    dry_run: Annotated[
        bool | None,
        typer.Option("--dry-run/--apply", metavar="", help="Only report (default for --all) / really delete."),
    ] = None,
    shard: ShardOpt = None,
    url: UrlOpt = None,
    config: ConfigOpt = None,
    json: JsonOpt = False,
    debug: DebugOpt = False,
) -> None:
    """Apply a retention policy to one thread or (dry run unless --apply) to every thread.

    A checkpoint is kept if --keep-last or --max-age keeps it (the newest one always stays); what
    is removed frees its objects for `gc`. Defaults come from \\[retention] in the config.
    """
    with guarded(debug):
        if (thread is None) == (not all_threads):
            raise Fail("give one thread id or --all")
        if shard is not None and not all_threads:
            raise Fail("--shard needs --all")
        s = settings(url, config)
        policy = build_policy(s, keep_last, max_age)
        archive: Any = open_from(s)
        dry = dry_run if dry_run is not None else all_threads
        if thread is not None:
            if not archive.list(thread):
                raise Fail(f"thread {thread!r} has no checkpoints in {archive.url!r}")
            reports = [archive.prune(thread, policy, dry_run=dry)]
        else:
            with progress("pruning threads", None) as tick:
                reports = archive.prune_all(
                    policy,
                    shard=shard,  # ShardOpt parsed it to (i, n)
                    concurrency=s.concurrency,
                    progress=lambda done, total, _: tick.set(done, total),
                    dry_run=dry,
                )
        totals = {
            "threads": len(reports),
            "removed": sum(_count(r.removed) for r in reports),
            "kept": sum(_count(r.kept) for r in reports),
            "objects_freed": sum(r.objects_freed for r in reports),
            "bytes_freed": sum(r.bytes_freed for r in reports),
        }
        if json:
            return emit_json({"dry_run": dry, "policy": repr(policy), "totals": totals, "threads": reports})
        console = out()
        for r in reports:
            console.print(r.summary(), markup=False)
        freed = f"{totals['objects_freed']} objects, {human_bytes(totals['bytes_freed'])}"
        tail = f"would free {freed}" if dry else f"{freed} to be deleted by gc after the grace period"
        tail += " (gc also deletes objects no commit references, e.g. left by crashed saves: its count can be higher)"
        console.print(
            f"{'dry run, nothing deleted: ' if dry else ''}{policy!r}: {totals['removed']} removed, "
            f"{totals['kept']} kept in {totals['threads']} thread(s); {tail}",
            markup=False,
        )


@app.command()
def gc(
    grace: Annotated[
        str | None,
        typer.Option(
            "--grace", help="Only objects older than this (default: the archive's gc_grace, set when it was created)."
        ),
    ] = None,
    unsafe_no_writers: Annotated[
        bool,
        typer.Option(
            "--unsafe-no-writers",
            metavar="",
            help="Allow a grace below the safe floor: only while no process writes to or reads the archive.",
        ),
    ] = False,
    url: UrlOpt = None,
    config: ConfigOpt = None,
    json: JsonOpt = False,
    debug: DebugOpt = False,
) -> None:
    """Delete objects no commit references (left by crashed or lost saves, or by prune)."""
    with guarded(debug):
        s = settings(url, config)
        archive: Any = open_from(s)
        given = parse_duration(grace) if grace is not None else None
        with progress("collecting garbage (listing and deleting objects)", None):
            report = archive.gc(grace=given, unsafe_no_writers=unsafe_no_writers)
        body = {**to_jsonable(report), "objects_deleted": len(getattr(report, "deleted", []))}
        if json:
            return emit_json(body)
        out().print(
            f"gc: deleted {body['objects_deleted']} objects ({human_bytes(body.get('bytes_freed', 0))}); "
            f"{body.get('pending', 0)} left until the grace period has passed",
            markup=False,
        )
        if body.get("errors"):
            raise Fail(f"gc finished with {len(body['errors'])} error(s): {body['errors'][0]}")


def destination(target: str, config: Path | None, *, create: bool) -> ArchiveCheckpointer:
    return open_from(ArchiveSettings.load(config, url=target), create=create)


@app.command("export")
def export_cmd(
    threads: ThreadsArg = None,
    all_threads: AllOpt = False,
    to: Annotated[str, typer.Option("--to", help="Destination archive URL, or a file ending in .tar.zst.")] = "",
    to_config: Annotated[Path | None, typer.Option("--to-config", help="Settings of the destination archive.")] = None,
    url: UrlOpt = None,
    config: ConfigOpt = None,
    json: JsonOpt = False,
    debug: DebugOpt = False,
) -> None:
    """Copy threads to another archive, or into a portable .tar.zst file."""
    with guarded(debug):
        if not to:
            raise Fail("give --to URL (another archive) or --to FILE.tar.zst")
        source = open_from(settings(url, config))
        names = pick_threads(source, threads, all_threads)
        total = sum(len(source.list(t)) for t in names)
        with progress("exporting", total) as tick:
            if is_portable(to):
                with open(to, "wb") as f:
                    reports = write_portable(source, names, f, tick)
            else:
                reports = copy_threads(source, destination(to, to_config, create=True), names, tick)
        if json:
            return emit_json({"to": to, "threads": reports})
        copied = sum(r.copied for r in reports)
        out().print(f"exported {copied} checkpoints of {len(reports)} thread(s) to {to}", markup=False)


@app.command("import")
def import_cmd(
    source: Annotated[str, typer.Argument(help="A .tar.zst export file, or another archive's URL.")],
    only: Annotated[list[str] | None, typer.Option("--thread", help="Only this thread (repeatable).")] = None,
    from_config: Annotated[Path | None, typer.Option("--from-config", help="Settings of a source archive.")] = None,
    url: UrlOpt = None,
    config: ConfigOpt = None,
    json: JsonOpt = False,
    debug: DebugOpt = False,
) -> None:
    """Copy threads from a .tar.zst export or another archive into this one (re-runs skip what is there)."""
    with guarded(debug):
        target = settings(url, config)
        wanted = set(only) if only else None
        # the destination is opened (created if need be) only once the source has shown it holds threads:
        # a damaged or hostile export leaves nothing behind
        dest: ArchiveCheckpointer | None = None
        with progress("importing", None) as tick:
            if is_portable(source):
                if not Path(source).is_file():
                    raise Fail(f"export file {source!r} does not exist")
                reports = []
                with open(source, "rb") as f:
                    for t, _, ckpts in read_portable(f, wanted):
                        dest = dest or open_from(target, create=True)
                        reports.append(replay(dest, t, ckpts, tick))
            else:
                src = destination(source, from_config, create=False)
                names = [t for t in src.threads() if wanted is None or t in wanted]
                reports = copy_threads(src, open_from(target, create=True), names, tick)
        if wanted is not None:
            missing = wanted - {r.thread_id for r in reports}
            if missing:
                raise Fail(f"thread {sorted(missing)[0]!r} is not in {source!r}")
        if json:
            return emit_json({"from": source, "threads": reports})
        table = Table(idcol("thread"), "copied", "already there")
        for r in reports:
            table.add_row(r.thread_id, str(r.copied), str(r.skipped))
        show_table(table)
