"""The wheel ships what `load_model("builtin:...")`, the agents and the recipes read at run time."""

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.real  # copies the checkout and builds a wheel with pip: the real tier
def test_wheel_contains_builtin_models_prompts_and_configs(tmp_path):
    """Build the wheel and list it: checkpoints, card, prompts and YAML presets are all inside."""
    pytest.importorskip("setuptools", reason="building the wheel without isolation needs setuptools")
    src = tmp_path / "src"  # build from a copy: setuptools writes build/ and *.egg-info next to the sources
    skip = shutil.ignore_patterns(".git", ".venv", "runs", "build", "*.egg-info", "__pycache__", ".*_cache")
    shutil.copytree(ROOT, src, ignore=skip)
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w",
                    str(tmp_path), str(src)], check=True, capture_output=True)  # fmt: skip
    (wheel,) = tmp_path.glob("latentworks-*.whl")
    archive = zipfile.ZipFile(wheel)
    names = set(archive.namelist())
    assert "latentworks/cli.py" in names and "latent/args.py" in names
    entry_points = next(n for n in names if n.endswith(".dist-info/entry_points.txt"))
    assert "latentworks = latentworks.cli:main" in archive.read(entry_points).decode()
    for model_dir in (ROOT / "latent" / "builtin_models").iterdir():
        for f in model_dir.iterdir():
            assert f"latent/builtin_models/{model_dir.name}/{f.name}" in names
    assert "agents/prompts/default.yaml" in names
    assert "finetune/recipes/arith-mini-v3.yaml" in names
    assert any(n.startswith("finetune/dlm/configs/") for n in names)


def test_every_third_party_import_is_in_core_or_the_packages_extra():
    """A module imported by `latent`/`agents`/`eval` is a core dependency (or a dependency of one); one
    imported by probes/, finetune/dlm/, families/ comes with that package's extra."""
    import ast
    import importlib.metadata as md
    import re
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    by_module = md.packages_distributions()

    def norm(req: str) -> str:
        return re.split(r"[<>=\\[ ;(!~]", req)[0].lower().replace("_", "-")

    def closure(reqs) -> set[str]:
        seen, todo = set(), [norm(r) for r in reqs]
        while todo:
            d = todo.pop()
            if d in seen:
                continue
            seen.add(d)
            try:
                todo += [norm(r) for r in md.requires(d) or [] if "extra ==" not in r]
            except md.PackageNotFoundError:
                pass
        return seen

    own = {"latent", "agents", "eval", "finetune", "probes", "families", "serve", "bench", "latentworks"}
    core = closure(project["dependencies"])
    extras = project["optional-dependencies"]
    plan = {"latent": None, "agents": "vllm", "eval": "eval", "probes": "probes", "finetune/dlm": "dlm",
            "finetune": "train", "families": "families", "serve": "serve"}  # fmt: skip
    # Imported only when their user asks (a figure): each user must sit where that package is allowed.
    on_demand = {"latent.plotting": "matplotlib"}
    problems = []
    for folder, extra in plan.items():
        allowed = core | (closure(extras[extra]) if extra else set())
        files = (ROOT / folder).glob("*.py") if folder == "finetune" else (ROOT / folder).rglob("*.py")
        for f in files:
            module = ".".join(f.relative_to(ROOT).with_suffix("").parts)
            for node in ast.walk(ast.parse(f.read_text())):
                names = []
                if isinstance(node, ast.Import):
                    names = [a.name for a in node.names]
                elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                    names = [node.module]
                for name in names:
                    if name in on_demand and on_demand[name] not in allowed:
                        problems.append(
                            f"{f.relative_to(ROOT)} imports {name}, which needs {on_demand[name]}"
                        )
                    root = name.split(".")[0]
                    if on_demand.get(module) == root:
                        continue  # the on-demand module itself
                    if root in own or root in sys.stdlib_module_names or root not in by_module:
                        continue  # not installed here (vllm): nothing to check against
                    if not {norm(d) for d in by_module[root]} & allowed:
                        problems.append(f"{f.relative_to(ROOT)} imports {root} (not in core or [{extra}])")
    assert sorted(set(problems)) == []
