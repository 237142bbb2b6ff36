"""The notebooks run top to bottom (nbclient) against an archive this test generates; kept without outputs."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

from tests import sample_archive

NOTEBOOKS = sorted((Path(__file__).resolve().parent.parent / "notebooks").glob("*.ipynb"))
NEEDS_RETENTION = {"03-retention-planning.ipynb"}


def test_there_are_notebooks_and_they_are_stripped() -> None:
    assert len(NOTEBOOKS) >= 3
    for path in NOTEBOOKS:
        nb = nbformat.read(path, as_version=4)
        for cell in nb.cells:
            if cell.cell_type == "code":
                assert cell.outputs == [] and cell.execution_count is None, f"{path.name} has outputs"


@pytest.fixture(scope="module")
def archive_env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    url = str(tmp_path_factory.mktemp("notebooks") / "archive")
    sample_archive.build(url, compact=True)
    return {"CKPT_ARCHIVE_URL": url, "CKPT_ARCHIVE_STORAGE_OPTIONS": "{}", "MPLBACKEND": "Agg"}


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_runs(path: Path, archive_env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    if path.name in NEEDS_RETENTION and importlib.util.find_spec("ckpt_archive.retention") is None:
        pytest.skip("ckpt_archive.retention is not in this build yet")
    for name in list(os.environ):
        if name.upper().startswith("CKPT_ARCHIVE_"):
            monkeypatch.delenv(name)
    for key, value in archive_env.items():
        monkeypatch.setenv(key, value)
    nb = nbformat.read(path, as_version=4)
    client = NotebookClient(nb, timeout=120, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}})
    client.execute()  # raises CellExecutionError naming the cell on any error
    outputs = [o for cell in nb.cells if cell.cell_type == "code" for o in cell.outputs]
    assert not [o for o in outputs if o.get("output_type") == "error"]
    text = "".join(str(o.get("text", "")) + str(o.get("data", {}).get("text/plain", "")) for o in outputs)
    assert sample_archive.THREADS.keys() & set(text.replace("'", " ").split()) or "support/" in text
