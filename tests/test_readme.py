"""The README's code runs, and prints what its comments say."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"


def _blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)


def test_readme_examples_run_and_print_what_they_claim() -> None:
    blocks = _blocks()
    assert blocks, "the README has no python example"
    for code in blocks:
        claims = [m.group(1).strip() for m in re.finditer(r"print\(.*\)\s+#\s*(.*)", code)]
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            exec(compile(code, str(README), "exec"), {})
        printed = out.getvalue().splitlines()
        assert len(printed) == len(claims)
        assert printed == claims
