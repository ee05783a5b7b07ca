"""The first examples a user copies — README.md's and docs/getting-started.md's first
agent — run on the packaged model and print the answer their comment shows."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
_BLOCK = re.compile(r"```python\n(.*?)```", re.DOTALL)
_SHOWN = re.compile(r"^print\(result\.output\)\s*#[^\n]*?(Order [^\n]*)$", re.MULTILINE)


def first_python_block(path: Path) -> str:
    found = _BLOCK.search(path.read_text())
    assert found is not None, f"no python block in {path.name}"
    return found.group(1)


@pytest.mark.parametrize("page", ["README.md", "docs/getting-started.md"])
def test_the_first_agent_prints_the_answer_its_comment_shows(page: str) -> None:
    code = first_python_block(ROOT / page)
    shown = _SHOWN.search(code)
    assert shown is not None, f"{page}: the print(result.output) line shows no answer"
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, page, "exec"), {"__name__": "snippet"})
    assert out.getvalue().splitlines()[0] == shown.group(1)
