"""Read-only commands: threads, history, show, diff, stats."""

from __future__ import annotations

from functools import partial
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.json import JSON
from rich.table import Table

from .._sync import run_sync
from ..analysis.conversation import message_row
from ..analysis.frames import gather_limited
from ..analysis.replay import Views, lg_ids, load_named
from ..archive import ArchiveCheckpointer
from ..delta import diff
from ..errors import CheckpointError
from ..model import Checkpoint, CheckpointInfo
from ..ops.reads import thread_folders
from ._common import (
    ConfigOpt,
    DebugOpt,
    Fail,
    JsonOpt,
    UrlOpt,
    app,
    emit_json,
    err,
    guarded,
    human_bytes,
    idcol,
    open_from,
    out,
    progress,
    settings,
    show_table,
)

ThreadArg = Annotated[str, typer.Argument(help="Thread id.")]


def listed(
    archive: ArchiveCheckpointer, threads: list[str] | None, concurrency: int
) -> tuple[dict[str, list[CheckpointInfo]], dict[str, CheckpointError]]:
    """(listing of each thread, {thread: error} of the threads whose manifest cannot be read):
    one damaged thread is reported as damaged and never hides the others. A folder whose thread id
    cannot be read at all is reported under its folder name."""
    unnamed: dict[str, CheckpointError] = {}
    if threads is None:
        names, unnamed = run_sync(thread_folders(archive.engine))
        names.sort()
    else:
        names = threads
    with progress("reading manifests", len(names)) as tick:

        async def one(thread: str) -> list[CheckpointInfo] | CheckpointError:
            try:
                return await archive.alist(thread)
            except CheckpointError as exc:
                return exc

        async def run() -> list[list[CheckpointInfo] | CheckpointError]:
            return await gather_limited([partial(one, t) for t in names], concurrency, tick)

        lists = run_sync(run())
    found = {t: v for t, v in zip(names, lists, strict=True) if not isinstance(v, CheckpointError)}
    damaged = {t: v for t, v in zip(names, lists, strict=True) if isinstance(v, CheckpointError)}
    return found, damaged | unnamed


def one_line(exc: CheckpointError) -> str:
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text.splitlines()[0] if text else '(no message)'}"


def fail_if_damaged(damaged: dict[str, CheckpointError]) -> None:
    """After the report: a non-zero exit when some thread could not be read."""
    if damaged:
        n = len(damaged)
        err().print(
            f"{n} damaged thread{'s' if n > 1 else ''}: run `ckpt-archive verify` for every problem", markup=False
        )
        raise typer.Exit(1)


def thread_infos(archive: ArchiveCheckpointer, thread: str) -> list[CheckpointInfo]:
    infos = archive.list(thread)
    if not infos:
        raise Fail(f"thread {thread!r} has no checkpoints in {archive.url!r}")
    return infos


def load_in_thread(archive: ArchiveCheckpointer, thread: str, checkpoint: str | None) -> Checkpoint:
    """The checkpoint ``checkpoint`` names in ``thread`` (the latest when None): an archive id or a
    LangGraph checkpoint id (``replay.load_named``: the archive id wins)."""
    if checkpoint is None:
        ckpt = archive.load(thread)
        if ckpt is None:
            raise Fail(f"thread {thread!r} has no checkpoints in {archive.url!r}")
        return ckpt
    found = load_named(archive, thread, checkpoint)
    if found is None:
        raise Fail(
            f"checkpoint {checkpoint!r} is not in thread {thread!r} (neither an archive nor a LangGraph id of it)"
        )
    return found


@app.command()
def threads(url: UrlOpt = None, config: ConfigOpt = None, json: JsonOpt = False, debug: DebugOpt = False) -> None:
    """List the threads with their checkpoint counts, latest step and stored bytes."""
    with guarded(debug):
        s = settings(url, config)
        by_thread, damaged = listed(open_from(s), None, s.concurrency)
        rows: list[dict[str, Any]] = [
            {
                "thread_id": t,
                "checkpoints": len(infos),
                "latest_step": infos[-1].step if infos else None,
                "latest_at": infos[-1].created_at if infos else None,
                "bytes": sum(i.stored_bytes for i in infos),
                "damaged": None,
            }
            for t, infos in by_thread.items()
        ]
        rows += [
            {
                "thread_id": t,
                "checkpoints": None,
                "latest_step": None,
                "latest_at": None,
                "bytes": None,
                "damaged": one_line(e),
            }
            for t, e in damaged.items()
        ]
        rows.sort(key=lambda r: r["thread_id"])
        if json:
            emit_json(rows)
            return fail_if_damaged(damaged)
        table = Table(idcol("thread"), "checkpoints", "latest step", "latest at", "stored")
        for r in rows:
            if r["damaged"] is not None:
                table.add_row(r["thread_id"], f"damaged: {r['damaged']}", "-", "-", "-")
                continue
            latest = r["latest_at"].isoformat(timespec="seconds") if r["latest_at"] else "-"
            table.add_row(r["thread_id"], str(r["checkpoints"]), str(r["latest_step"]), latest, human_bytes(r["bytes"]))
        show_table(table)
        fail_if_damaged(damaged)


@app.command()
def history(
    thread: ThreadArg,
    limit: Annotated[
        int | None, typer.Option("--limit", "-n", min=1, help="Only the newest N checkpoints (still oldest first).")
    ] = None,
    url: UrlOpt = None,
    config: ConfigOpt = None,
    json: JsonOpt = False,
    debug: DebugOpt = False,
) -> None:
    """Checkpoints of a thread, oldest first (from the manifest; no state is read)."""
    with guarded(debug):
        infos = thread_infos(open_from(settings(url, config)), thread)
        if limit is not None:
            infos = infos[-limit:]
        if json:
            return emit_json(infos)
        table = Table("step", idcol("checkpoint"), idcol("parent"), "kind", "created at", "stored", "metadata")
        for i in infos:
            meta = ", ".join(f"{k}={v}" for k, v in i.metadata.items())
            table.add_row(
                str(i.step),
                i.checkpoint_id,
                i.parent_id or "-",
                i.kind,
                i.created_at.isoformat(timespec="seconds"),
                human_bytes(i.stored_bytes),
                meta,
            )
        show_table(table)


def pick(state: dict[str, Any], key: str) -> Any:
    """``state[key]``, or a dotted path (``messages.5.content``) into nested dicts and lists (an integer
    part indexes a list, negative from the end) when no top-level key has that name."""
    if key in state:
        return state[key]
    node: Any = state
    walked: list[str] = []
    for part in key.split("."):
        here = ".".join(walked) or "the state"
        if isinstance(node, list):
            try:
                index = int(part)
            except ValueError:
                raise Fail(f"key {key!r}: {here} is a list, {part!r} is not an integer index") from None
            if not -len(node) <= index < len(node):
                raise Fail(f"key {key!r}: index {index} is out of range ({here} has {len(node)} items)")
            node = node[index]
        elif isinstance(node, dict):
            if part not in node:
                keys = ", ".join(sorted(map(str, node))) or "none"
                raise Fail(f"key {key!r} is not in the state ({part!r} is not in {here}; its keys: {keys})")
            node = node[part]
        else:
            raise Fail(f"key {key!r}: {here} is a {type(node).__name__}, it has no {part!r}")
        walked.append(part)
    return node


RawOpt = Annotated[
    bool,
    typer.Option("--raw", metavar="", help="The state as stored (a LangGraph state: with its cells and bookkeeping)."),
]


@app.command()
def show(
    thread: ThreadArg,
    checkpoint: Annotated[
        str | None,
        typer.Option("--checkpoint", help="Checkpoint id, archive or LangGraph (default: latest)."),
    ] = None,
    key: Annotated[str | None, typer.Option("--key", "-k", help="Only this key (dotted for nested).")] = None,
    url: UrlOpt = None,
    config: ConfigOpt = None,
    json: JsonOpt = False,
    raw: RawOpt = False,
    debug: DebugOpt = False,
) -> None:
    """Show a checkpoint's state (the latest by default), or one key of it; its messages as a conversation.

    A LangGraph state shows the graph's channels as plain JSON, without LangGraph's bookkeeping
    (``--raw``: as stored). Messages are one a line, cut to the width (``--json``: whole)."""
    with guarded(debug):
        archive = open_from(settings(url, config))
        ckpt = load_in_thread(archive, thread, checkpoint)
        state = ckpt.state if raw else Views(archive).of(ckpt)
        body = ckpt.model_dump(mode="json")
        body["state"] = state
        if key is not None:
            body.pop("state")
            body["key"], body["value"] = key, pick(state, key)
        if json:
            return emit_json(body)
        console = out()
        console.print(f"thread {ckpt.thread_id}  checkpoint {ckpt.checkpoint_id}  step {ckpt.step}", markup=False)
        if (lg := langgraph_line(ckpt)) is not None:
            console.print(lg, markup=False)
        if key is not None:
            if not raw and is_messages(body["value"]):
                return print_conversation(console, body["value"])
            return console.print(JSON.from_data(body["value"]))
        messages: list[Any] = []
        rest = state
        if not raw and is_messages(state.get("messages")):
            messages, rest = state["messages"], {k: v for k, v in state.items() if k != "messages"}
        elif not raw and "messages" not in state:
            messages = ckpt.messages  # the checkpoint's own message list (spec.md section 13)
        if rest or not messages:
            console.print(JSON.from_data(rest))
        if messages:
            console.print(f"messages ({len(messages)}):", markup=False)
            print_conversation(console, messages)


def langgraph_line(ckpt: Checkpoint) -> str | None:
    """For a checkpoint the LangGraph saver wrote: its LangGraph id, step and source (the names a
    LangGraph user knows it by, ``get_state(config).config``), from the record's metadata."""
    lg_id = (lg_ids(ckpt) or (None, None))[0]
    if lg_id is None:
        return None
    step, source = ckpt.metadata.get("step"), ckpt.metadata.get("source")
    return f"langgraph checkpoint {lg_id}  step {step}  source {source}"


def is_messages(value: Any) -> bool:
    """A non-empty list of messages: each a dict with ``content`` (a LangChain message's stored JSON, or a
    ``{"role", "content"}`` dict)?"""
    return isinstance(value, list) and bool(value) and all(isinstance(m, dict) and "content" in m for m in value)


def conversation_line(index: int, message: Any) -> str:
    """One message on one line: index, role, then its text, its tool calls or its tool result."""
    import json as _json

    row = message_row(message)
    role = row["role"] or "?"
    text = " ".join(row["text"].split())
    parts = []
    if row["role"] == "tool" or row["tool_call_id"]:
        tool = " ".join(x for x in (row["name"], f"[{row['status']}]" if row["status"] else None) if x)
        parts.append(f"{tool}:" if tool else "")
    if text:
        parts.append(text)
    if row["tool_calls"]:
        calls = _json.loads(row["tool_calls"])
        parts.append(
            " ".join(
                f"-> {c.get('name')}({_json.dumps(c.get('args'), ensure_ascii=False)})" if isinstance(c, dict) else "->"
                for c in calls
            )
        )
    return f"{index:>4} {role:<9} {' '.join(p for p in parts if p)}"


def print_conversation(console: Console, messages: list[Any], first: int = 0, prefix: str = "") -> None:
    """Each message on one line cut to the console's width (``...`` where cut)."""
    width = max(20, console.width)
    for i, message in enumerate(messages, start=first):
        line = prefix + conversation_line(i, message)
        console.print(line if len(line) <= width else line[: width - 3] + "...", markup=False, highlight=False)


def structured_diff(old: dict[str, Any], new: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    """Added, changed and removed key paths (nested dicts are walked; appends and in-place list edits
    reported as such: ``appended`` items, or a splice's ``at``, ``removed`` and ``inserted`` items)."""
    result: dict[str, list[dict[str, Any]]] = {"added": [], "changed": [], "removed": []}
    for op in diff(old, new):
        path = op["path"]
        before: Any = old
        present = True
        for part in path:
            if isinstance(before, dict) and part in before:
                before = before[part]
            else:
                present = False
                break
        if op["op"] == "del":
            result["removed"].append({"path": path, "old": before})
        elif op["op"] == "append":
            result["changed"].append({"path": path, "appended": op["value"]})
        elif op["op"] == "splice":
            at, count, inserted = op["value"]["at"], op["value"]["remove"], op["value"]["insert"]
            edit = {"at": at, "removed": before[at : at + count], "inserted": inserted}
            result["changed"].append({"path": path, **edit})
        elif present:
            result["changed"].append({"path": path, "old": before, "new": op["value"]})
        else:
            result["added"].append({"path": path, "new": op["value"]})
    return result


@app.command("diff")
def diff_cmd(
    thread: ThreadArg,
    from_id: Annotated[
        str | None, typer.Option("--from", help="Older checkpoint, archive or LangGraph id (default: parent of --to).")
    ] = None,
    to_id: Annotated[
        str | None, typer.Option("--to", help="Newer checkpoint, archive or LangGraph id (default: latest).")
    ] = None,
    url: UrlOpt = None,
    config: ConfigOpt = None,
    json: JsonOpt = False,
    raw: RawOpt = False,
    debug: DebugOpt = False,
) -> None:
    """What changed between two checkpoints of a thread: added, changed, removed (nested).

    Of a LangGraph thread: the graph's channels, without LangGraph's bookkeeping (``--raw``: the stored
    states); new messages one a line."""
    with guarded(debug):
        archive = open_from(settings(url, config))
        new = load_in_thread(archive, thread, to_id)
        old: Checkpoint | None = None
        if from_id is not None:
            old = load_in_thread(archive, thread, from_id)
        elif new.parent_id is not None:
            old = load_in_thread(archive, thread, new.parent_id)
        views = Views(archive)
        old_id = None if old is None else old.checkpoint_id
        old_state: dict[str, Any] = {} if old is None else old.state if raw else views.of(old)
        new_state = new.state if raw else views.of(new)
        changes = structured_diff(old_state, new_state)
        body = {"thread_id": thread, "from": old_id, "to": new.checkpoint_id, **changes}
        if json:
            return emit_json(body)
        console = out()
        for line in diff_header(thread, old_id, new.checkpoint_id):
            console.print(line, markup=False, highlight=False)
        for c in changes["added"]:
            console.print(f"[green]+ {'.'.join(c['path'])}[/] = {_brief(c['new'])}")
        for c in changes["changed"]:
            if "appended" in c and is_messages(c["appended"]):
                n = len(c["appended"])
                console.print(f"[yellow]~ {'.'.join(c['path'])}[/] += {n} message{'s' if n > 1 else ''}")
                before = pick_list(old_state, c["path"])
                print_conversation(console, c["appended"], first=before, prefix="  ")
                continue
            if "appended" in c:
                detail = f"+= {_brief(c['appended'])}"
            elif "inserted" in c:
                detail = f"at {c['at']}: {_brief(c['removed'])} -> {_brief(c['inserted'])}"
            else:
                detail = f"{_brief(c['old'])} -> {_brief(c['new'])}"
            console.print(f"[yellow]~ {'.'.join(c['path'])}[/] {detail}")
        for c in changes["removed"]:
            console.print(f"[red]- {'.'.join(c['path'])}[/] (was {_brief(c['old'])})")
        if not any(changes.values()):
            console.print("no changes")


HEADER_WIDTH = 80


def diff_header(thread: str, old_id: str | None, new_id: str) -> list[str]:
    """``thread: old -> new`` on one line when it fits in ``HEADER_WIDTH`` columns; else split before the
    arrow; else (a long thread id, which archive ids embed) the thread, then ``from``/``to`` lines. The
    ids are whole: a shortened id may name another checkpoint, and a user pastes them back."""
    old = old_id or "(empty)"
    line = f"{thread}: {old} -> {new_id}"
    if len(line) <= HEADER_WIDTH:
        return [line]
    two = [f"{thread}: {old}", f"{' ' * min(len(thread) + 2, 8)}-> {new_id}"]
    if all(len(x) <= HEADER_WIDTH for x in two):
        return two
    return [f"{thread}:", f"  from {old}", f"  to   {new_id}"]


def pick_list(state: dict[str, Any], path: list[str]) -> int:
    """The length of the list at ``path`` in ``state`` (0 when there is none)."""
    node: Any = state
    for part in path:
        node = node.get(part) if isinstance(node, dict) else None
    return len(node) if isinstance(node, list) else 0


def _brief(value: Any, limit: int = 80) -> str:
    import json as _json

    text = _json.dumps(value, ensure_ascii=False)
    text = text if len(text) <= limit else text[: limit - 3] + "..."
    return text.replace("[", r"\[")


def thread_stats(thread: str, infos: list[CheckpointInfo]) -> dict[str, Any]:
    full = [i for i in infos if i.kind == "full"]
    delta = [i for i in infos if i.kind == "delta"]
    snap_bytes, delta_bytes = sum(i.stored_bytes for i in full), sum(i.stored_bytes for i in delta)
    growth = None
    if len(full) >= 2 and full[-1].step != full[0].step:
        growth = (full[-1].stored_bytes - full[0].stored_bytes) / (full[-1].step - full[0].step)
    return {
        "thread_id": thread,
        "checkpoints": len(infos),
        "snapshots": len(full),
        "deltas": len(delta),
        "first_step": min((i.step for i in infos), default=None),
        "last_step": max((i.step for i in infos), default=None),
        "snapshot_bytes": snap_bytes,
        "delta_bytes": delta_bytes,
        "bytes": snap_bytes + delta_bytes,
        "mean_delta_bytes": delta_bytes / len(delta) if delta else None,
        "latest_snapshot_bytes": full[-1].stored_bytes if full else None,
        "snapshot_growth_per_step": growth,
    }


@app.command()
def stats(
    thread: Annotated[str | None, typer.Argument(help="One thread (default: every thread).")] = None,
    url: UrlOpt = None,
    config: ConfigOpt = None,
    json: JsonOpt = False,
    debug: DebugOpt = False,
) -> None:
    """Counts, stored bytes, snapshot/delta split and growth, per thread and in total."""
    with guarded(debug):
        s = settings(url, config)
        archive = open_from(s)
        damaged: dict[str, CheckpointError] = {}
        if thread is not None:
            by_thread = {thread: thread_infos(archive, thread)}
        else:
            by_thread, damaged = listed(archive, None, s.concurrency)
        rows = [{**thread_stats(t, infos), "damaged": None} for t, infos in by_thread.items()]
        total = {
            k: sum(r[k] for r in rows)
            for k in ("checkpoints", "snapshots", "deltas", "snapshot_bytes", "delta_bytes", "bytes")
        }
        total["threads"] = len(rows) + len(damaged)
        total["damaged"] = len(damaged)
        rows += [{"thread_id": t, "damaged": one_line(e)} for t, e in damaged.items()]  # no figure is known for them
        rows.sort(key=lambda r: r["thread_id"])
        if json:
            emit_json({"threads": rows, "total": total})
            return fail_if_damaged(damaged)
        table = Table(idcol("thread"), "ckpts", "full/delta", "snapshots", "deltas", "mean delta", "growth/step")
        for r in rows:
            if r["damaged"] is not None:
                table.add_row(r["thread_id"], f"damaged: {r['damaged']}", "-", "-", "-", "-", "-")
                continue
            mean = "-" if r["mean_delta_bytes"] is None else human_bytes(r["mean_delta_bytes"])
            growth = "-" if r["snapshot_growth_per_step"] is None else f"{r['snapshot_growth_per_step']:+.0f} B"
            table.add_row(
                r["thread_id"],
                str(r["checkpoints"]),
                f"{r['snapshots']}/{r['deltas']}",
                human_bytes(r["snapshot_bytes"]),
                human_bytes(r["delta_bytes"]),
                mean,
                growth,
            )
        console = out()
        show_table(table, console)
        console.print(
            f"total: {total['threads']} threads, {total['checkpoints']} checkpoints, "
            f"{human_bytes(total['bytes'])} "
            f"({human_bytes(total['snapshot_bytes'])} snapshots, {human_bytes(total['delta_bytes'])} deltas)"
            + (f", {total['damaged']} damaged" if damaged else "")
        )
        fail_if_damaged(damaged)
