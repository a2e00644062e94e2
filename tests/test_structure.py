"""Properties of the source tree, computed with `ast`: short functions in the core packages, strict
floors and no import circle, `latent/` as the only door to hidden states (cached forwards, hooks, private
names), no private name used outside its module, and every command line of the packages built by the one
builder in `latent/args.py`.

Floors (declared once in `latent/floors.py`, lowest first):

    latent < agents < eval < finetune | probes | families | serve < bench < latentworks

A package imports only packages on lower floors: not one above (a climb), not a sibling on its own floor.
`finetune`, `probes` and `families` share a floor because none uses another: each is a separate user of
`latent`, `agents` and `eval` (shared helpers they need move down: task data into `eval/`, device choice
into `latent/`). Every import counts: module-level, inside a function, under `if TYPE_CHECKING:` (held to
the same rule, so a type-only import cannot hide a climb), and `importlib.import_module("x")` with a
literal name. The router's commands, imported by names held in a table, only go down. `tests/` and
`examples/` stand outside the floors and may import anything.
"""

import ast
import sys
from pathlib import Path

import pytest

from latent.floors import FLOORS, PACKAGES, floor_of

ROOT = Path(__file__).resolve().parents[1]
OUTSIDE_FLOORS = {"tests", "examples", "docs"}  # may import anything; not imported by the project
SHORT = ["latent", "agents", "eval", "serve", "latentworks"]
MAX_LINES = 80
HOOKS = {"register_forward_hook", "register_forward_pre_hook", "register_full_backward_hook"}
# Packages whose command lines come from `latent.args`: every one below the router, scripts included
BUILDER_USERS = ["latent", "agents", "eval", "finetune", "probes", "families", "serve", "bench"]
BUILDER = {"latent.args", "latent.entry"}  # the builder and the entry point: the one place argparse is called
# Rooms: the sub-folders of code in a package, each holding one kind of thing (the map is in docs/floors.md)
ROOMS = {
    "eval": {"tasks", "scoring", "sandbox", "run_state"},
    "bench": {"speed", "studies", "gpu", "data"},
}
# Run by the sandbox as separate `python -I -S` interpreters (by file path or as source), never imported
SANDBOX_SCRIPTS = {
    "eval.sandbox.launcher",
    "eval.sandbox.code_judge",
    "eval.sandbox.code_worker",
    "eval.sandbox.code_codec",
}
PARSER_CALLS = {"add_argument", "add_parser", "add_subparsers", "add_argument_group", "ArgumentParser"}


def _modules() -> dict[str, Path]:
    mods = {}
    for pkg in PACKAGES:
        for f in (ROOT / pkg).rglob("*.py"):
            name = ".".join(f.relative_to(ROOT).with_suffix("").parts)
            mods[name.removesuffix(".__init__")] = f
    return mods


MODULES = _modules()
TREES = {name: ast.parse(path.read_text()) for name, path in MODULES.items()}


def long_functions(packages: list[str], limit: int) -> list[str]:
    found = []
    for name, tree in TREES.items():
        if name.split(".")[0] not in packages:
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                lines = node.end_lineno - node.lineno + 1
                if lines > limit:
                    found.append(
                        f"{MODULES[name].relative_to(ROOT)}:{node.lineno} {node.name} ({lines} lines)"
                    )
    return found


def _resolve(name: str, target: str) -> str | None:
    """The project module `target` names (the longest dotted prefix that is one), else None."""
    while target and target not in MODULES:
        target = target.rpartition(".")[0]
    return target if target and target != name else None


def _targets(name: str, node: ast.AST) -> list[str]:
    """Dotted names one node imports: `import x`, `from x import y` (y counts when it is a submodule),
    relative imports, and `importlib.import_module("x")` / `import_module("x")` with a literal string."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    if isinstance(node, ast.ImportFrom):
        base = _from_base(name, node)
        return [f"{base}.{a.name}" if f"{base}.{a.name}" in MODULES else base for a in node.names]
    if isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant):
        func = node.func
        called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
        if called == "import_module" and isinstance(node.args[0].value, str):
            return [node.args[0].value]
    return []


def _from_base(name: str, node: ast.ImportFrom) -> str:
    """The absolute module of `from <base> import ...` inside module `name` (relative imports resolved)."""
    if not node.level:
        return node.module or ""
    parts = name.split(".") if MODULES[name].name == "__init__.py" else name.split(".")[:-1]
    parts = parts[: len(parts) - node.level + 1]
    return ".".join(parts + ([node.module] if node.module else []))


def import_edges() -> list[tuple[str, str, int]]:
    """(importer, imported project module, line) for every import anywhere in a module's tree."""
    edges = []
    for name, tree in TREES.items():
        for node in ast.walk(tree):
            for target in _targets(name, node):
                module = _resolve(name, target)
                if module is not None:
                    edges.append((name, module, node.lineno))
    return edges


def import_graph() -> dict[str, set[str]]:
    """Module -> project modules it imports anywhere (module level or inside a function; `from pkg import
    submodule` counts as the submodule, so a package importing its own submodules is not a cycle)."""
    graph: dict[str, set[str]] = {name: set() for name in TREES}
    for a, b, _ in import_edges():
        graph[a].add(b)
    return graph


def floor_breaks() -> list[str]:
    """Imports that climb to a higher floor or cross to a sibling package on the same floor."""
    found = []
    for a, b, line in import_edges():
        pa, pb = a.split(".")[0], b.split(".")[0]
        if pa != pb and floor_of(pb) >= floor_of(pa):
            how = "climbs to" if floor_of(pb) > floor_of(pa) else "crosses its floor to"
            found.append(f"{MODULES[a].relative_to(ROOT)}:{line} {how} {b}")
    return found


def private_uses() -> list[str]:
    """Outside its module, a `_name` of another project module: `from m import _x` or `m._x`."""
    found = []
    for name, tree in TREES.items():
        where, aliases = MODULES[name].relative_to(ROOT), {}
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                base = _from_base(name, node)
                for a in node.names:
                    if f"{base}.{a.name}" in MODULES:
                        aliases[a.asname or a.name] = f"{base}.{a.name}"
                    elif _private(a.name) and base in MODULES and base != name:
                        found.append(f"{where}:{node.lineno} from {base} import {a.name}")
            elif isinstance(node, ast.Import):
                for a in node.names:
                    aliases[a.asname or a.name.split(".")[0]] = a.name if a.asname else a.name.split(".")[0]
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and _private(node.attr):
                module = _dotted(node.value, aliases)
                if module in MODULES and module != name:
                    found.append(f"{where}:{node.lineno} {module}.{node.attr}")
    return found


def _private(attr: str) -> bool:
    return attr.startswith("_") and not attr.startswith("__")


def _dotted(node: ast.AST, aliases: dict[str, str]) -> str | None:
    """The project module an expression such as `sandbox` or `eval.sandbox` names, else None."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name) or node.id not in aliases:
        return None
    return ".".join([aliases[node.id], *reversed(parts)])


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]
    sys.setrecursionlimit(max(10000, sys.getrecursionlimit()))

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in graph:
        if v not in index:
            visit(v)
    return out


def door_leaks() -> list[str]:
    """Outside latent/: a call passing a KV cache, a forward hook, or a private latent name."""
    leaks = []
    for name, tree in TREES.items():
        if name.split(".")[0] == "latent":
            continue
        where = MODULES[name].relative_to(ROOT)
        for node in ast.walk(tree):
            if isinstance(node, ast.Call):
                kws = {k.arg for k in node.keywords}
                if "past_key_values" in kws or ("cache" in kws and kws & {"input_ids", "inputs_embeds"}):
                    leaks.append(f"{where}:{node.lineno} forward with a cache")
                if isinstance(node.func, ast.Attribute) and node.func.attr in HOOKS:
                    leaks.append(f"{where}:{node.lineno} {node.func.attr}")
            elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "latent":
                leaks += [
                    f"{where}:{node.lineno} imports {a.name}" for a in node.names if a.name.startswith("_")
                ]
    return leaks


def hand_built_parsers(packages: list[str]) -> list[str]:
    """argparse used directly (a parser, a flag, a sub-command) instead of the dataclass builder."""
    found = []
    for name, tree in TREES.items():
        if name.split(".")[0] not in packages or name in BUILDER:
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Call):
                func = node.func
                called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
                if called in PARSER_CALLS:
                    found.append(f"{MODULES[name].relative_to(ROOT)}:{node.lineno} {called}")
    return found


def test_no_function_over_80_lines_in_the_core_packages():
    assert long_functions(SHORT, MAX_LINES) == []


def test_no_import_cycle_anywhere():
    assert cycles(import_graph()) == []


def test_no_import_climbs_a_floor_or_crosses_to_a_sibling():
    assert floor_breaks() == []


def test_every_top_level_package_has_a_floor():
    """A new top-level folder of Python code must be given a floor in `latent/floors.py` (or be one of the
    folders outside the floors), so the floor checks cannot miss it."""
    code = [*ROOT.glob("*/*.py"), *ROOT.glob("*/*/*.py")]  # bench/ holds its scripts in rooms only
    folders = {p.relative_to(ROOT).parts[0] for p in code} - OUTSIDE_FLOORS
    assert folders == set(PACKAGES) and len(PACKAGES) == len(set(PACKAGES)), (folders, FLOORS)


def rooms(package: str) -> set[str]:
    """The sub-folders of `package` that hold Python code."""
    top = ROOT / package
    return {p.relative_to(top).parts[0] for p in top.rglob("*.py") if p.parent != top}


def test_every_room_is_declared_and_on_the_map():
    """The sub-folders of code in eval/ and bench/ are the declared rooms, each with its line in
    docs/floors.md, so a new room is placed on purpose and shown to readers."""
    floors_md = (ROOT / "docs" / "floors.md").read_text()
    for package, declared in ROOMS.items():
        assert rooms(package) == declared, package
        missing = [room for room in sorted(declared) if f"`{package}/{room}/`" not in floors_md]
        assert missing == [], f"rooms of {package}/ missing from the map in docs/floors.md"


def test_each_eval_room_names_its_entry_points():
    """Each room of eval/ lists its entry points in its `__init__`'s `__all__`, each imported from a
    module of the room itself, and defines nothing else (the room's API, not a copy)."""
    for room in sorted(ROOMS["eval"]):
        name = f"eval.{room}"
        body = TREES[name].body
        exported = next(
            [e.value for e in n.value.elts]
            for n in body
            if isinstance(n, ast.Assign) and getattr(n.targets[0], "id", "") == "__all__"
        )
        imported = {
            a.asname or a.name: n.module for n in body if isinstance(n, ast.ImportFrom) for a in n.names
        }
        assert exported and sorted(exported) == sorted(imported), name
        assert all(imported[e].startswith(f"{name}.") for e in exported), name
        assert not [n for n in body if isinstance(n, ast.FunctionDef | ast.ClassDef)], name


def test_the_sandbox_scripts_are_never_imported():
    """The sandbox's launcher, judge, worker and codec run only as separate interpreters: no module
    imports them (so model-written code they load never runs in a process of the project), and they
    import nothing of the project (a fresh `python -I -S` holds only the standard library)."""
    assert all(name in MODULES for name in SANDBOX_SCRIPTS)
    assert [(a, b) for a, b, _ in import_edges() if b in SANDBOX_SCRIPTS or a in SANDBOX_SCRIPTS] == []


def test_evaluate_enters_the_run_folder_through_run_store():
    """The runner reaches a run's files only through `eval.run_state.RunStore` (and seals records with
    `eval.run_state.records`): it imports nothing of the file layer below them."""
    reached = {b for a, b, _ in import_edges() if a == "eval.runner" and b.startswith("eval.run_state")}
    assert reached == {"eval.run_state.store", "eval.run_state.records"}


def test_no_private_name_is_used_outside_its_module():
    assert private_uses() == []


def test_latent_is_the_only_door_to_hidden_states():
    assert door_leaks() == []


def test_every_command_line_comes_from_the_one_builder():
    assert hand_built_parsers(BUILDER_USERS) == []


def test_the_checks_can_fail(monkeypatch):
    """Each check finds a planted offender (so an empty result means something)."""
    bad = ast.parse(
        "from latent.loading import _resolve\n"
        "def f(m, c):\n    m.layer.register_forward_hook(print)\n    return m(input_ids=1, past_key_values=c)\n"
        + "def g():\n"
        + "    x = 1\n" * MAX_LINES
        + "def h(p):\n    p.add_argument('--x')\n    return argparse.ArgumentParser()\n"
    )
    monkeypatch.setitem(TREES, "eval.planted", bad)
    monkeypatch.setitem(MODULES, "eval.planted", ROOT / "eval" / "planted.py")
    assert len(door_leaks()) == 3
    assert any(" g (" in f for f in long_functions(["eval"], MAX_LINES))
    assert [f.split()[-1] for f in hand_built_parsers(["eval"])] == ["add_argument", "ArgumentParser"]
    graph = {"a": {"b"}, "b": {"a"}, "c": set()}
    assert cycles(graph) == [["a", "b"]]


def _plant(monkeypatch, name: str, source: str) -> None:
    monkeypatch.setitem(TREES, name, ast.parse(source))
    monkeypatch.setitem(MODULES, name, ROOT / Path(*name.split(".")).with_suffix(".py"))


def test_the_import_checks_can_fail(monkeypatch):
    """Planted offenders: climbs (type-only, in a function, by `import_module`), a sibling crossing, a
    circle closed by function-level imports only, and private names used across modules."""
    _plant(
        monkeypatch,
        "latent.planted",
        "import importlib\nfrom typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from agents import latentmas\n"
        "def f():\n    import eval.runner\n    return importlib.import_module('latentworks.cli')\n",
    )
    _plant(monkeypatch, "probes.planted", "def g():\n    from finetune import cli\n")
    _plant(monkeypatch, "eval.planted_a", "def f():\n    from eval import planted_b\n")
    _plant(monkeypatch, "eval.planted_b", "def g():\n    from .planted_a import f\n")
    _plant(
        monkeypatch,
        "agents.planted",
        "from eval.sandbox import _run\nimport eval.sandbox as sb\nfrom latent import loading\n"
        "sb._limits(1)\nloading._resolve('x')\n",
    )
    assert sorted(f.split()[-1] for f in floor_breaks()) == [
        "agents.latentmas",
        "eval.runner",
        "eval.sandbox",
        "eval.sandbox",
        "finetune.cli",
        "latentworks.cli",
    ]
    assert "crosses its floor to finetune.cli" in " ".join(floor_breaks())
    assert ["eval.planted_a", "eval.planted_b"] in cycles(import_graph())
    assert sorted(f.split(" ", 1)[1] for f in private_uses() if f.startswith("agents/planted.py")) == [
        "eval.sandbox._limits",
        "from eval.sandbox import _run",
        "latent.loading._resolve",
    ]


@pytest.fixture(scope="module")
def tiny():
    from latent.testing import tiny_model

    return tiny_model("llama")


def test_token_logprobs_match_the_raw_model(tiny):
    """`token_logprobs` (through the one forward) equals log-softmax of the HF model's own logits."""
    import torch

    enc = tiny.encode(["a b c d e", "a b"])
    ids, mask = enc["input_ids"], enc["attention_mask"]
    ours = tiny.token_logprobs(ids, mask)
    pos = (mask.cumsum(1) - 1).clamp_min(0)
    with torch.no_grad():
        logits = tiny.model(input_ids=ids, attention_mask=mask, position_ids=pos).logits.float()
    ref = logits[:, :-1].log_softmax(-1).gather(-1, ids[:, 1:, None]).squeeze(-1)
    keep = (mask[:, 1:] * mask[:, :-1]).bool()
    assert torch.allclose(ours[keep], ref[keep], atol=1e-5) and (ours[~keep] == 0).all()


def test_decoder_layers_finds_llama_and_gpt2_layers(tiny):
    from latent.model import decoder_layers
    from latent.testing import tiny_model

    assert len(decoder_layers(tiny.model)) == tiny.num_layers
    gpt2 = tiny_model("gpt2")
    assert decoder_layers(gpt2.model) is gpt2.model.transformer.h
    with pytest.raises(TypeError, match="decoder layers"):
        decoder_layers(__import__("torch").nn.Linear(2, 2))
