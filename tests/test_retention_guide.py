"""The retention guide's example runs and prints what the guide says it prints."""

from __future__ import annotations

import contextlib
import io
import os
import re
from pathlib import Path
from typing import Any

GUIDE = Path(__file__).parent.parent / "docs" / "guides" / "retention.md"


def test_retention_example_output_matches(tmp_path: Any) -> None:
    text = GUIDE.read_text()
    section = text[text.index("<!-- section: retention -->") :]
    code = re.search(r"```python\n(.*?)```", section, re.S)
    shown = re.search(r"```text\n(.*?)```", section, re.S)
    assert code is not None and shown is not None
    out = io.StringIO()
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        with contextlib.redirect_stdout(out):
            exec(compile(code.group(1), "retention guide", "exec"), {})
    finally:
        os.chdir(cwd)

    def normal(s: str) -> str:  # compressed sizes vary by a byte or two with the random ids
        return re.sub(r"\d+ bytes freed", "N bytes freed", s).strip()

    assert normal(out.getvalue()) == normal(shown.group(1))
