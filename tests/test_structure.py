"""Properties of the source tree, computed with `ast`: short functions in the core packages, no import
cycle anywhere, `latent/` as the only door to hidden states (cached forwards, hooks, private names), and
every command line of the packages built by the one builder in `latent/args.py`."""

import ast
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ["latent", "agents", "eval", "finetune", "probes", "families", "bench", "latentworks"]
SHORT = ["latent", "agents", "eval", "latentworks"]
MAX_LINES = 80
HOOKS = {"register_forward_hook", "register_forward_pre_hook", "register_full_backward_hook"}
# Packages whose command lines come from `latent.args` (families/ demos and bench/ scripts keep theirs)
BUILDER_USERS = ["latent", "agents", "eval", "finetune", "probes"]
BUILDER = {"latent.args", "latent.entry"}  # the builder and the entry point: the one place argparse is called
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


def import_graph() -> dict[str, set[str]]:
    """Module -> project modules it imports at module level (`from pkg import submodule` counts as the
    submodule, so a package importing its own submodules is not a cycle by itself)."""
    graph = {}
    for name, tree in TREES.items():
        is_pkg = MODULES[name].name == "__init__.py"
        deps = set()
        for node in tree.body:
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parts = name.split(".") if is_pkg else name.split(".")[:-1]
                    parts = parts[: len(parts) - node.level + 1]
                    base = ".".join(parts + ([node.module] if node.module else []))
                subs = [f"{base}.{a.name}" for a in node.names if f"{base}.{a.name}" in MODULES]
                targets = subs + ([base] if len(subs) < len(node.names) else [])
            else:
                continue
            deps |= {t for t in targets if t in MODULES and t != name}
        graph[name] = deps
    return graph


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
