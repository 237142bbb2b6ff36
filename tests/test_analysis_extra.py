"""checkpoints_frame without the analysis extra: one typed line naming the extra (pandas hidden)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

SCRIPT = """
import importlib.abc
import sys


class Hide(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("pandas", "polars"):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None


sys.meta_path.insert(0, Hide())
import ckpt_archive as ca
from ckpt_archive.analysis import checkpoints_frame
from ckpt_archive.errors import MissingExtra
url = sys.argv[1]
archive = ca.open_archive(url, create=True)
for backend in ("pandas", "polars"):
    try:
        checkpoints_frame(archive, backend=backend)
    except MissingExtra as exc:
        assert "\\n" not in str(exc), exc
        print(type(exc).__name__, exc)
    else:
        raise SystemExit("no MissingExtra for " + backend)
print("arrow rows", checkpoints_frame(archive, backend="arrow").num_rows)
"""


def test_checkpoints_frame_names_the_extra(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(tmp_path / "a")],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("MissingExtra backend='pandas' needs pandas")
    assert "pip install 'ckpt-archive[analysis]'" in lines[0] and "pip install '.[analysis]'" in lines[0]
    assert lines[1].startswith("MissingExtra backend='polars' needs polars")
    assert lines[2] == "arrow rows 0"
