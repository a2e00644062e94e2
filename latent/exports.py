"""A package's public names, declared once: each submodule's own `__all__`, read from its source without
importing it, so `package.name` loads the submodule on first use and the package repeats no list."""

from __future__ import annotations

import ast
from collections.abc import Callable, Sequence
from pathlib import Path

import lazy_loader

__all__ = ["declared_names", "lazy_exports"]


def declared_names(source: Path) -> list[str]:
    """The literal `__all__` of a module's source; a module without one exports nothing by this route."""
    for node in ast.parse(source.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "__all__" for t in node.targets):
            return list(ast.literal_eval(node.value))
    raise ImportError(f"{source} has no literal __all__: declare its public names there to export them")


def lazy_exports(
    package: str, init_file: str, submodules: Sequence[str]
) -> tuple[Callable[[str], object], Callable[[], list[str]], list[str]]:
    """`lazy_loader.attach` over the union of `submodules`' own `__all__`; a name two submodules both
    declare is an ImportError naming both (one home per name)."""
    here = Path(init_file).parent
    home: dict[str, str] = {}
    for sub in submodules:
        for name in declared_names(here / f"{sub.replace('.', '/')}.py"):
            if name in home:
                raise ImportError(
                    f"{package}: {name!r} is declared in both {home[name]} and {sub}; keep it in one __all__"
                )
            home[name] = sub
    attrs: dict[str, list[str]] = {}
    for name, sub in home.items():
        attrs.setdefault(sub, []).append(name)
    return lazy_loader.attach(package, submod_attrs=attrs)
