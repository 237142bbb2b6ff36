"""Markdown tables, target checks and PNG plots from ``results/peers.json`` (written by ``bench_peers.py``).

.venv/bin/python benchmarks/report.py   # re-render without re-running
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
from bench_core import states

from ckpt_archive import codec

RESULTS = Path(__file__).with_name("results")
OURS = ("native", "ArchiveSaver")
PEER = "objectstorage-zstd"


def ms(x: float | None) -> str:
    return "n/a" if x is None else (f"{x * 1000:.1f}" if x < 1 else f"{x * 1000:,.0f}")


def ratio(ours: float, peer: float) -> str:
    return f"{ours / peer:.2f}x" if peer else "n/a"


def gc(r: dict[str, Any]) -> str:
    return f" ({r['bytes_gc']:,.0f} after gc)" if "bytes_gc" in r else ""


def trips(r: dict[str, Any]) -> str:
    """Sequential round trips, counted client side on the async fsspec methods (naive-json uses sync ones)."""
    if r["store"] == "naive-json" or "rt_load" not in r:
        return "n/a"
    return f"{r['rt_load']:.0f} / {r['rt_list']:.0f} / {r['rt_list1']:.0f}"


def w1_table(rows: list[dict[str, Any]], floor: int, s3: bool) -> list[str]:
    head = (
        "| store | bytes stored | vs floor | save p50 ms first/last 100 | save p99 ms first/last 100 "
        "| last/first mean | load latest ms | list all ms | list limit=1 ms |"
    )
    sep = "|---" * 9 + "|"
    if s3:
        head += " req/save mean (max after 1st) | 1st save req / LIST | LIST in later saves "
        head += "| req load | req list | req list1 | round trips load / list / list1 |"
        sep += "---|" * 7
    out = [head, sep]
    for r in rows:
        line = (
            f"| {r['store']} | {r['bytes']:,.0f}{gc(r)} | {r['bytes'] / floor:.1f}x "
            f"| {ms(r['first_p50'])} / {ms(r['last_p50'])} | {ms(r['first_p99'])} / {ms(r['last_p99'])} "
            f"| {r['last_mean'] / r['first_mean']:.2f} | {ms(r['load'])} | {ms(r['list'])} | {ms(r['list1'])} |"
        )
        if s3:
            line += (
                f" {r['req_save']:.2f} ({r['req_save_max_after_first']:.0f}) | {r['req_save_first']:.0f} / "
                f"{r['save_lists_first']:.0f} | {r['save_lists'] - r['save_lists_first']:.0f} | {r['req_load']:.0f}"
                f" | {r['req_list']:.0f} | {r['req_list1']:.0f} | {trips(r)} |"
            )
        out.append(line)
    return out


def best_peer_lines(rows: list[dict[str, Any]]) -> list[str]:
    """Against the best *durable* peer: InMemorySaver keeps nothing and is read in-process, so it is left out."""
    peers = [r for r in rows if r["store"] not in OURS and r["store"] != "InMemorySaver"]
    out = ["| ours | metric | ours | best peer | ratio (ours / best peer) |", "|---|---|---|---|---|"]
    for r in rows:
        if r["store"] not in OURS or not peers:
            continue
        for key, label, fmt in (
            ("bytes", "bytes stored", lambda v: f"{v:,.0f}"),
            ("last_p50", "save p50, last 100", ms),
            ("load", "load latest (fresh process)", ms),
            ("list", "list all", ms),
            ("list1", "list limit=1", ms),
        ):
            best = min(peers, key=lambda p, k=key: float(p[k]))
            out.append(
                f"| {r['store']} | {label} | {fmt(r[key])} | {fmt(best[key])} ({best['store']}) "
                f"| {ratio(r[key], best[key])} |"
            )
    return out


def target_checks(w1: list[dict[str, Any]], floor: int) -> list[str]:
    out = []
    mark = {True: "met", False: "**NOT met**"}
    for kind in ("local", "s3"):
        rows = {r["store"]: r for r in w1 if r["target"] == kind}
        peer = rows.get(PEER)
        for name in OURS:
            r = rows.get(name)
            if r is None:
                continue
            where = f"{name}, {kind}"
            for label, key in (("", "bytes"), (" after gc", "bytes_gc")):
                if key not in r:
                    continue
                if peer:
                    frac = peer["bytes"] / r[key]
                    out.append(f"- {where}: W1 bytes{label} ≤ 1/20 of {PEER}: 1/{frac:.1f} — {mark[frac >= 20]}")
                out.append(
                    f"- {where}: bytes{label} within 3x of the zstd floor: {r[key] / floor:.1f}x — "
                    f"{mark[r[key] <= 3 * floor]}"
                )
            flat = r["last_mean"] / r["first_mean"]
            out.append(f"- {where}: save flat (last-100 mean ≤ 1.5x first-100 mean): {flat:.2f}x — {mark[flat <= 1.5]}")
            if kind == "s3":
                later = r["save_lists"] - r["save_lists_first"]
                ok = r["req_save_max_after_first"] <= 3 and later == 0
                out.append(
                    f"- {where}: ≤ 3 requests per save, no LIST: mean {r['req_save']:.2f}, max after the first save "
                    f"{r['req_save_max_after_first']:.0f}, LIST after the first save {later:.0f} (first save, which "
                    f"creates the archive: {r['req_save_first']:.0f} requests, {r['save_lists_first']:.0f} LIST) — "
                    f"{mark[ok]}"
                )
            if kind == "s3" and "rt_load" in r:
                out.append(
                    f"- {where}: load latest in ≤ 3 sequential round trips: {r['rt_load']:.0f} ({r['req_load']:.0f} "
                    f"requests) — {mark[r['rt_load'] <= 3]}"
                )
            if peer:
                out.append(
                    f"- {where}: load latest (fresh process) not slower than {PEER}: {ms(r['load'])} vs "
                    f"{ms(peer['load'])} ms — {mark[r['load'] <= peer['load']]}"
                )
                speed = peer["list"] / r["list"]
                out.append(
                    f"- {where}: list of {r['n_list']:,.0f} ≥ 20x faster than {PEER}: {speed:.1f}x — "
                    f"{mark[speed >= 20]}"
                )
    return out


def w3_table(rows: list[dict[str, Any]]) -> list[str]:
    out = [
        "| store | target | save all s | ms/save | bytes | list threads ms | load 100 latest ms | prune s | gc s "
        "| bytes after | requests: save / list / load100 / prune+gc |",
        "|---" * 11 + "|",
    ]
    for r in rows:
        n = r["threads"] * r["steps"]
        reqs = "n/a"
        if "req_save" in r:
            pr = "n/a" if r.get("prune") is None else f"{r['req_prune'] + r['req_gc']:,}"
            reqs = f"{r['req_save']:,} / {r['req_threads_list']:,} / {r['req_load100']:,} / {pr}"
        pruned = r.get("prune") is not None
        prune, gc, after = (f"{r['prune']:.1f}", f"{r['gc']:.1f}", f"{r['bytes_after']:,}") if pruned else ("n/a",) * 3
        out.append(
            f"| {r['store']} | {r['target']} | {r['save']:.1f} | {r['save'] / n * 1000:.1f} | {r['bytes']:,} "
            f"| {ms(r['threads_list'])} | {ms(r['load100'])} | {prune} | {gc} | {after} | {reqs} |"
        )
    return out


def plots(w1: list[dict[str, Any]], out: Path) -> list[str]:
    names = []
    for kind in ("local", "s3"):
        rows = [r for r in w1 if r["target"] == kind]
        if not rows:
            continue
        fig, ax = plt.subplots(figsize=(8, 4.5))
        for r in rows:
            s = np.array(r["saves"]) * 1000
            k = 20
            smooth = [float(np.median(s[max(0, i - k) : i + 1])) for i in range(len(s))]
            ax.plot(smooth, label=r["store"])
        ax.set(yscale="log", xlabel="step", ylabel="save ms (running median of 20)", title=f"W1 save latency, {kind}")
        ax.legend(fontsize=8)
        fig.tight_layout()
        name = f"w1_save_latency_{kind}.png"
        fig.savefig(out / name, dpi=110)
        plt.close(fig)
        names.append(name)
    fig, ax = plt.subplots(figsize=(8, 4.5))
    labels = [f"{r['store']}\n{r['target']}" for r in w1]
    ax.bar(range(len(w1)), [r["bytes"] for r in w1], color=["C0" if r["store"] in OURS else "C7" for r in w1])
    ax.set_xticks(range(len(w1)), labels, rotation=60, fontsize=7, ha="right")
    ax.set(yscale="log", ylabel="bytes stored", title="W1 bytes stored (log scale)")
    fig.tight_layout()
    fig.savefig(out / "w1_bytes.png", dpi=110)
    plt.close(fig)
    return [*names, "w1_bytes.png"]


def render_peers(out: Path = RESULTS) -> str:
    data = json.loads((out / "peers.json").read_text())
    p, w1, w3 = data["params"], data["w1"], data["w3"]
    floor = len(codec.compress(codec.dumps(states(p["steps"])[-1])))
    lines = [
        f"Command: `.venv/bin/python {p['command']}`; medians of {p['repeats']} runs.",
        "",
        f"**W1**: one thread, {p['steps']:,} steps, one ~1 KB message appended per step plus small counters. "
        f"Floor (zstd of the final state = the distinct content): {floor:,} bytes.",
    ]
    for kind in ("local", "s3"):
        rows = [r for r in w1 if r["target"] == kind]
        if rows:
            title = "local disk" if kind == "local" else "S3 (moto over HTTP; requests counted at the server)"
            lines += ["", f"W1, {title}:", "", *w1_table(rows, floor, kind == "s3"), ""]
            lines += [
                "Ours against the best durable peer on this target (InMemorySaver left out):",
                "",
                *best_peer_lines(rows),
            ]
    lines += [
        "",
        f"**W3**: {p['w3_threads']:,} threads x {p['w3_steps']} steps, then list threads, load 100 random latest "
        "(fresh store object), prune every thread to keep_last 5 (then gc, for ours).",
        "",
        *w3_table(w3),
        "",
        "Targets (W1):",
        "",
        *target_checks(w1, floor),
    ]
    if p.get("skipped"):
        lines += ["", f"Not installed, skipped: {', '.join(p['skipped'])}."]
    lines += ["", *[f"![{n}]({n})" for n in plots(w1, out)]]
    text = "\n".join(lines) + "\n"
    (out / "peers.md").write_text(text)
    return text


def render_w3(out: Path = RESULTS) -> str:
    """``w3.md`` from ``w3.json`` (``bench_peers.py --w3-only``): W3 alone, typically at full size."""
    data = json.loads((out / "w3.json").read_text())
    p = data["params"]
    lines = [
        f"Command: `.venv/bin/python {p['command']}`; one run per store.",
        "",
        f"**W3**: {p['w3_threads']:,} threads x {p['w3_steps']} steps, then list threads, load 100 random latest "
        "(fresh store object), prune every thread to keep_last 5 (then gc, for ours).",
        "",
        *w3_table(data["w3"]),
    ]
    if p.get("skipped"):
        lines += ["", f"Not installed, skipped: {', '.join(p['skipped'])}."]
    text = "\n".join(lines) + "\n"
    (out / "w3.md").write_text(text)
    return text


if __name__ == "__main__":
    print(render_peers())
