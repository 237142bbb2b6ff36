"""The README's API tour runs as written."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

README = Path(__file__).parent.parent / "README.md"


def test_tour_runs(tmp_path: Any) -> None:
    text = README.read_text()
    tour = text[text.index("## A tour of the API") :]
    code = re.search(r"```python\n(.*?)```", tour, re.S)
    assert code is not None
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        exec(compile(code.group(1), "README tour", "exec"), {})
    finally:
        os.chdir(cwd)
    assert (tmp_path / "my-archive" / "_archive.json").exists()
