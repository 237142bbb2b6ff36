"""Every key the package builds is built by ``format/layout.py``: no module outside ``format/`` spells
a folder, a marker or a suffix of the layout (spec.md section 3), and the helpers build exactly the
keys the spec lays out."""

from __future__ import annotations

import ast
import pathlib
import re

from ckpt_archive.format import layout

PACKAGE = pathlib.Path(__file__).resolve().parent.parent / "ckpt_archive"
_FOLDERS = r"_log|_parts|snapshots|deltas|_blobs|_langgraph|writes|events"
LAYOUT_LITERAL = re.compile(
    rf"(^|/)({_FOLDERS})/|/({_FOLDERS})(/|$)|^(_log|_parts|_blobs|_langgraph)$"
    r"|thread_id=|session_id=|_head\.json|_archive\.json|\.json\.zst|\.parquet|\.manifest\."
)
"""A string that names a part of the layout: a folder beside a slash (or one of the underscored folders
alone), the thread or session prefix, the marker, the hint, or a suffix of a stored object."""


def layout_literals(source: str) -> list[tuple[int, str]]:
    """(line, text) of each string literal of ``source`` (f-string parts included; docstrings, comments
    and bare string statements left out) that spells a part of the layout."""
    tree = ast.parse(source)
    prose = {id(node.value) for node in ast.walk(tree) if isinstance(node, ast.Expr)}
    return sorted(
        (node.lineno, node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and id(node) not in prose
        and LAYOUT_LITERAL.search(node.value)
    )


def test_the_scan_finds_inline_keys() -> None:
    """What the scan below would report (and what it leaves alone)."""
    code = '''
"""Docstring: thread_id=<enc>/_log/<seq>.json.zst is prose."""
key = f"{folder}/_log/{1:020d}{suffix}"
logs = [k for k in keys if folder_of(k) == "_log"]
name = "x.parquet"
glob = "thread_id=*/deltas/*"
fine = ref["pages"], "deltas", f"{a}/{b}"
'''
    assert [text for _, text in layout_literals(code)] == ["/_log/", "_log", "x.parquet", "thread_id=*/deltas/*"]


def test_no_key_is_spelled_outside_format() -> None:
    found = [
        f"{path.relative_to(PACKAGE)}:{line}: {text!r}"
        for path in sorted(PACKAGE.rglob("*.py"))
        if path.relative_to(PACKAGE).parts[0] != "format"
        for line, text in layout_literals(path.read_text())
    ]
    assert found == [], "build these keys with ckpt_archive.format.layout:\n" + "\n".join(found)


def test_the_helpers_build_the_specs_keys() -> None:
    """Spec.md section 3 and 11, key by key (unchanged by moving them into the layout)."""
    t = "t/1"
    assert layout.thread_dir(t) == "thread_id=t%2F1"
    assert layout.head_key(t) == layout.folder_head_key("thread_id=t%2F1") == "thread_id=t%2F1/_head.json.zst"
    assert layout.log_dir(t) == "thread_id=t%2F1/_log"
    assert layout.log_key(t, 7) == layout.folder_log_key("thread_id=t%2F1", 7)
    assert layout.log_key(t, 7) == "thread_id=t%2F1/_log/00000000000000000007.json.zst"
    assert layout.manifest_key(t, 7) == "thread_id=t%2F1/_log/00000000000000000007.manifest.json.zst"
    assert layout.snapshot_key(t, 3, "c") == "thread_id=t%2F1/snapshots/000000000003-c.json.zst"
    assert re.fullmatch(
        r"thread_id=t%2F1/snapshots/000000000003-c\.[0-9a-f]{12}\.json\.zst", layout.rewrite_snapshot_key(t, 3, "c")
    )
    assert layout.segment_key(t, 3, "tok") == "thread_id=t%2F1/deltas/000000000003-tok.parquet"
    assert layout.segments_dir("thread_id=x") == "thread_id=x/deltas"
    assert layout.part_key(t, "tok") == "thread_id=t%2F1/_parts/tok.json.zst"
    assert layout.DELTA_GLOB == "thread_id=*/deltas/*.parquet"
    assert layout.blob_key("f" * 64) == f"_blobs/{'f' * 64}.zst" and layout.is_blob_key(layout.blob_key("f" * 64))
    assert layout.writes_key(t, "c/2", "n.json.zst") == "_langgraph/writes/t%2F1/c%2F2/n.json.zst"
    assert layout.events_key("s", 2) == "session_id=s/events/00000000000000000002.parquet"
    for key in (layout.log_key(t, 1), layout.part_key(t, "x"), layout.segment_key(t, 0, "x")):
        assert layout.folder_of(key.removeprefix(layout.thread_dir(t) + "/")) in layout.THREAD_FOLDERS
    assert layout.folder_of("_log/deeper/x") is None and layout.folder_of("other/x") is None
