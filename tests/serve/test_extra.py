"""The serve extra installs the web stack; the core install stays without one."""

from __future__ import annotations

import importlib.metadata as md
import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
WEB = {"fastapi", "starlette", "uvicorn", "sse-starlette", "hypercorn", "flask", "quart", "aiohttp", "django"}


def _name(requirement: str) -> str:
    return re.split(r"[<>=\[ ;(!~]", requirement)[0].lower().replace("_", "-")


def _closure(requirements: list[str]) -> set[str]:
    """The distributions `requirements` pull in, as installed here (extras of theirs not followed)."""
    seen, todo = set(), [_name(r) for r in requirements]
    while todo:
        dist = todo.pop()
        if dist in seen:
            continue
        seen.add(dist)
        try:
            todo += [_name(r) for r in md.requires(dist) or [] if "extra ==" not in r]
        except md.PackageNotFoundError:
            pass
    return seen


def test_core_install_pulls_in_no_web_framework():
    """No core dependency, nor any of theirs, is a web framework or ASGI server."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert _closure(project["dependencies"]) & WEB == set()


def test_serve_extra_has_the_server_and_all_includes_it():
    """`pip install "latentworks[serve]"` brings the server; `.[all]` (the README's test install) too."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extras = project["optional-dependencies"]
    assert {"fastapi", "uvicorn"} <= {_name(r) for r in extras["serve"]}
    assert re.search(r"\bserve\b", extras["all"][0]) and "serve-examples" in extras["all"][0]
    assert "serve*" in (ROOT / "pyproject.toml").read_text()  # the package ships in the wheel
