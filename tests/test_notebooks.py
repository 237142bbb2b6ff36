"""The notebooks run top to bottom (nbclient) on the archives users have, kept without outputs.

Each notebook runs on ``make demo``'s archive (``demo.simulate``, small) and on a LangGraph archive that
its own cell writes with a real graph (``NOTEBOOK_EXAMPLE=langgraph``). Every plot is drawn inline (an
``image/png`` output, no ``matplotlib.use("Agg")``), and on the LangGraph archive what the notebooks
report is the graph's: its conversation and its failed tool calls, never LangGraph's bookkeeping.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path
from typing import Any

import nbformat
import pytest
from nbclient import NotebookClient

from ckpt_archive import demo

NOTEBOOKS = sorted((Path(__file__).resolve().parent.parent / "notebooks").glob("*.ipynb"))
NEEDS_RETENTION = {"03-retention-planning.ipynb"}
ARCHIVES = ["demo", "langgraph"]
BOOKKEEPING = ("branch:to", "__start__", "versions_seen", "channel_versions", "__pregel")


def test_there_are_notebooks_and_they_are_stripped() -> None:
    assert len(NOTEBOOKS) >= 3
    for path in NOTEBOOKS:
        nb = nbformat.read(path, as_version=4)
        for cell in nb.cells:
            if cell.cell_type == "code":
                assert cell.outputs == [] and cell.execution_count is None, f"{path.name} has outputs"
                assert "matplotlib.use(" not in cell.source, f"{path.name}: plots are shown inline"


@pytest.fixture(scope="module")
def archives(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[dict[str, str], set[str]]]:
    """Per archive: the notebook's environment and the thread ids its outputs must name."""
    root = tmp_path_factory.mktemp("notebooks")
    made = str(root / "demo-archive")
    demo.simulate(made, threads=2, steps=(25, 30))
    base = {"CKPT_ARCHIVE_STORAGE_OPTIONS": "{}"}
    return {
        "demo": ({**base, "CKPT_ARCHIVE_URL": made}, {"customer-1000/session-0", "customer-1001/session-1"}),
        "langgraph": (
            {**base, "CKPT_ARCHIVE_URL": str(root / "unused"), "NOTEBOOK_EXAMPLE": "langgraph"},
            {"chat-1", "chat-2"},
        ),
    }


def run_notebook(path: Path, env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    for name in list(os.environ):
        if name.upper().startswith("CKPT_ARCHIVE_") or name in ("MPLBACKEND", "NOTEBOOK_EXAMPLE"):
            monkeypatch.delenv(name)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    root = str(Path(__file__).resolve().parent.parent)  # the kernel imports this checkout's ckpt_archive
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p))
    nb = nbformat.read(path, as_version=4)
    client = NotebookClient(nb, timeout=120, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}})
    client.execute()  # raises CellExecutionError naming the cell on any error
    return [cell for cell in nb.cells if cell.cell_type == "code"]


def text_of(outputs: list[Any]) -> str:
    return "".join(str(o.get("text", "")) + str(o.get("data", {}).get("text/plain", "")) for o in outputs)


@pytest.mark.parametrize("archive", ARCHIVES)
@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_runs(path: Path, archive: str, archives: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    if path.name in NEEDS_RETENTION and importlib.util.find_spec("ckpt_archive.retention") is None:
        pytest.skip("ckpt_archive.retention is not in this build yet")
    if archive == "langgraph":
        pytest.importorskip("langgraph")
    env, threads = archives[archive]
    cells = run_notebook(path, env, monkeypatch)
    outputs = [o for cell in cells for o in cell.outputs]
    assert not [o for o in outputs if o.get("output_type") == "error"]
    text = text_of(outputs)
    assert threads & set(text.replace("'", " ").split()), text[:500]
    plots = [c for c in cells if "plt.show()" in c.source]
    assert plots, f"{path.name} draws nothing"
    for cell in plots:  # every plot cell shows its figure inline (or says why there is nothing to plot)
        shown = [o for o in cell.outputs if "image/png" in o.get("data", {})]
        assert shown or "no tool results" in text_of(cell.outputs), (path.name, cell.source[:80])
    if archive == "langgraph":
        assert not [b for b in BOOKKEEPING if b in text], f"{path.name} shows LangGraph's bookkeeping"
        if path.name.startswith("02"):
            failed = next(c for c in cells if "failed = " in c.source)
            assert text_of(failed.outputs).count("lookup failed for fail-") >= 4  # 2 threads x 8 turns: 2 each
            keys = next(c for c in cells if "keys that change most" in c.source)
            assert "messages" in text_of(keys.outputs)
