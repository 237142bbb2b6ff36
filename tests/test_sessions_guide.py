"""The sessions guide (parity section): every python block runs as written (in a scratch directory)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

GUIDE = Path(__file__).resolve().parent.parent / "docs" / "guides" / "sessions-protection-typed.md"


def parity_blocks() -> list[str]:
    text = GUIDE.read_text(encoding="utf-8")
    start = text.index("<!-- section: parity -->")
    end = text.find("<!-- section:", start + 1)
    section = text[start : end if end != -1 else None]
    return re.findall(r"```python\n(.*?)```", section, flags=re.S)


def test_there_is_one_example_per_api() -> None:
    blocks = parity_blocks()
    assert len(blocks) == 3
    assert "CheckpointManager" in blocks[0] and "try_restore_state" in blocks[1] and "TypedCheckpointer" in blocks[2]


@pytest.mark.parametrize("index", range(3))
def test_readme_example_runs(index: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    code = parity_blocks()[index]
    exec(compile(code, f"sessions guide example {index + 1}", "exec"), {"__name__": "__readme__"})
