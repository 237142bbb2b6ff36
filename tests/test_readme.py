"""The README's examples run as written, it stays a short user's document, and every link in it and in
docs/ leads somewhere."""

from __future__ import annotations

import importlib.util
import re
import runpy
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"


def python_blocks(text: str) -> list[str]:
    return re.findall(r"```python\n(.*?)```", text, re.S)


def section(text: str, heading: str) -> str:
    start = text.index(heading)
    end = text.find("\n## ", start + len(heading))
    return text[start : end if end != -1 else None]


def test_native_tour_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (code,) = python_blocks(section(README.read_text(), "## The native API"))
    monkeypatch.chdir(tmp_path)
    exec(compile(code, "README native API", "exec"), {})
    assert (tmp_path / "my-archive" / "_archive.json").exists()


def test_langgraph_quick_start_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    one_line, graph = python_blocks(section(README.read_text(), "## LangGraph"))
    assert "ArchiveSaver.from_url" in one_line
    monkeypatch.chdir(tmp_path)
    script = tmp_path / "quick_start.py"
    script.write_text(graph)
    runpy.run_path(str(script), run_name="__readme__")  # a real module: TypedDict resolves its annotations
    assert (tmp_path / "langgraph-archive" / "_archive.json").exists()


def test_readme_is_a_short_users_document() -> None:
    text = README.read_text()
    assert len(text.encode()) < 12_500
    assert text.index("ArchiveSaver.from_url") < text.index("## The native API")  # LangGraph on the first screen
    assert "make demo" in text and "make test" in text


def _links(path: Path) -> list[str]:
    return re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", path.read_text())


@pytest.mark.parametrize(
    "doc", [README, *sorted((ROOT / "docs").rglob("*.md"))], ids=lambda p: str(p.relative_to(ROOT))
)
def test_every_local_link_resolves(doc: Path) -> None:
    missing = [
        link for link in _links(doc) if not re.match(r"[a-z]+://", link) and not (doc.parent / link).resolve().exists()
    ]
    assert not missing, f"{doc.relative_to(ROOT)} links to missing {missing}"


def test_performance_page_is_generated_from_the_results() -> None:
    spec = importlib.util.spec_from_file_location("perf_doc", ROOT / "benchmarks" / "perf_doc.py")
    assert spec is not None and spec.loader is not None
    perf_doc = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(perf_doc)
    assert (ROOT / "docs" / "performance.md").read_text() == perf_doc.render(), "run benchmarks/perf_doc.py"


def test_every_test_the_guarantees_name_exists() -> None:
    """A guarantee is only as good as its test: each one named in docs/guarantees.md must exist."""
    text = (ROOT / "docs" / "guarantees.md").read_text()
    missing, current = [], None
    for ref in re.findall(r"`((?:tests/[\w/]+\.py)?(?:::\w+)?)(?:\[[^\]`]*\])?`", text):
        path, _, name = ref.partition("::")
        if path:
            current = ROOT / path
            if not current.exists():
                missing.append(path)
                continue
        if name and (current is None or not re.search(rf"(def {name}\b|^{name} = )", current.read_text(), re.M)):
            missing.append(f"{current.name if current else '?'}::{name}")
    assert not missing, missing
