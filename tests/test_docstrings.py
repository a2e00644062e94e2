"""Every public function and class of a covered package has a docstring (read with ast, nothing imported)."""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
COVERED = ["latentworks", "finetune"]  # packages held to full public-docstring coverage
DEFS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


def undocumented(package: Path) -> list[str]:
    """`file:line name` of each public module-level function or class, or public method, with no docstring."""
    missing = []
    for path in sorted(package.rglob("*.py")):
        tree = ast.parse(path.read_text())
        methods = [m for c in tree.body if isinstance(c, ast.ClassDef) for m in c.body if isinstance(m, DEFS)]
        for node in [n for n in tree.body if isinstance(n, DEFS)] + methods:
            if not node.name.startswith("_") and not ast.get_docstring(node):
                missing.append(f"{path.relative_to(package.parent)}:{node.lineno} {node.name}")
    return missing


@pytest.mark.parametrize("package", COVERED)
def test_every_public_function_and_class_has_a_docstring(package):
    """A public name with no docstring is listed with its file and line."""
    assert not undocumented(ROOT / package), undocumented(ROOT / package)


def test_the_check_finds_a_missing_docstring(tmp_path):
    """An undocumented public function is found; a private one and a documented one are not."""
    (tmp_path / "pkg").mkdir()
    code = 'def shown():\n    pass\n\n\ndef _hidden():\n    pass\n\n\ndef ok():\n    """Doc."""\n'
    (tmp_path / "pkg" / "mod.py").write_text(code)
    assert undocumented(tmp_path / "pkg") == ["pkg/mod.py:1 shown"]
