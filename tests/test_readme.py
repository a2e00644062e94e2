"""The README's Python snippets run as written (on the shipped built-in model)."""

import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"
SNIPPETS = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)


def test_readme_has_python_snippets():
    assert len(SNIPPETS) >= 2


@pytest.mark.parametrize("code", SNIPPETS, ids=[f"snippet{i + 1}" for i in range(len(SNIPPETS))])
def test_snippet_runs(code, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)  # a snippet that wrote files would write them here
    exec(compile(code, "README snippet", "exec"), {"__name__": "readme"})
    assert list(tmp_path.iterdir()) == []
