"""The models and bridges a graph file names, checked by their configs and loaded.

A graph file may give each agent its own model (`agents: [{name, role, model: NAME}]`, NAME as
`load_model` takes it) and a `latent` edge between two different models the bridge it reads through
(`edges: [{src, dst, mode: latent, bridge: NAME}]`). `check_graph_models` reads only the models'
`config.json`, their tokenizers and the bridges' `bridge_config.json`, so a graph that cannot run fails
in seconds, every problem named in one error, before any weights load; `load_graph_models` then loads each
model and bridge once.

Example:
    ```python
    import agents
    g = agents.Graph.from_file("examples/graphs/handoff_two_models.yaml")
    models, bridges = agents.load_graph_models(g)
    res = agents.run(g, models, questions, prompts="handoff", shares=shares, bridges=bridges)
    ```
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from agents.graph import Graph
from agents.latentmas import cross_model_problem

if TYPE_CHECKING:
    from latent.bridge import Bridge
    from latent.model import LatentModel

CACHE_SHAPE = ("hidden_size", "num_hidden_layers", "num_key_value_heads")


def model_names(g: Graph, default: str | None = None) -> dict[str, str]:
    """Model key -> the name it loads by: an agent's `model`, or `default` for agents that name none."""
    keys = {a.model or "default" for a in g.agents}
    if "default" in keys and not default:
        missing = [a.name for a in g.agents if not a.model]
        raise ValueError(
            f"agents {missing} of graph {g.name!r} name no `model`: give each one a `model` in the file, or "
            "pass a default model."
        )
    return {k: (default if k == "default" else k) for k in sorted(keys)}


def _config(name: str):
    from transformers import AutoConfig

    from latent.loading import resolve_model_path

    path = resolve_model_path(name)
    if os.path.isfile(os.path.join(path, "adapter_config.json")):  # a trained channel: its base's shapes
        from peft import PeftConfig

        path = resolve_model_path(PeftConfig.from_pretrained(path).base_model_name_or_path)
    return AutoConfig.from_pretrained(path).get_text_config(decoder=True)


def _vocab(name: str) -> dict:
    from transformers import AutoTokenizer

    from latent.loading import resolve_model_path

    return AutoTokenizer.from_pretrained(resolve_model_path(name)).get_vocab()


def check_graph_models(g: Graph, default: str | None = None) -> None:
    """Refuse, before any weights load, every `kv`/`latent` edge between two models whose caches differ
    (unless a `latent` edge names a bridge that fits them) and every bridge that is missing or does not
    fit; one error names them all, each with its edge, its two models and the fix."""
    from latent.bridge import read_bridge_config

    names = model_names(g, default)
    configs = {k: _config(n) for k, n in names.items()}
    problems = []
    for e in g.edges:
        ks, kd = g.agent(e.src).model or "default", g.agent(e.dst).model or "default"
        if e.mode == "text":
            continue
        pair = f"models {names[ks]!r} and {names[kd]!r}"
        why = (
            None
            if names[ks] == names[kd]
            else _cache_difference(configs[ks], configs[kd], names[ks], names[kd])
        )
        if e.bridge and why is None:
            problems.append(
                f"latent edge {e.src}->{e.dst} names bridge {e.bridge!r} but joins {pair}, which share a cache: drop `bridge`"
            )
        elif e.bridge:
            try:
                conf = read_bridge_config(e.bridge)
            except (FileNotFoundError, ValueError) as err:
                problems.append(f"latent edge {e.src}->{e.dst}: {str(err).rstrip('.')}")
                continue
            have = (configs[ks].hidden_size, configs[kd].hidden_size)
            if (conf["sender_size"], conf["receiver_size"]) != have:
                problems.append(
                    f"latent edge {e.src}->{e.dst} joins {pair} (width {have[0]} -> {have[1]}), but bridge "
                    f"{e.bridge!r} maps {conf['sender_size']} -> {conf['receiver_size']} (trained for "
                    f"{conf.get('sender')!r} -> {conf.get('receiver')!r})"
                )
        elif why:
            problems.append(cross_model_problem(e, pair, why))
    if problems:
        raise ValueError("models cannot share latent memory: " + "; ".join(problems) + ".")


def _cache_difference(a, b, name_a: str, name_b: str) -> str | None:
    """Why two models cannot read each other's KV cache (config shapes, then tokenizers), or None."""
    for attr in CACHE_SHAPE:
        va, vb = getattr(a, attr, None), getattr(b, attr, None)
        if va != vb:
            return f"different {attr} ({va} vs {vb})"
    if _vocab(name_a) != _vocab(name_b):
        return "different tokenizers"
    return None


def load_graph_models(
    g: Graph, default: str | None = None, **load_kwargs
) -> tuple[dict[str, LatentModel], dict[str, Bridge]]:
    """(model key -> model, bridge name -> bridge) for `agents.run(g, models, ..., bridges=bridges)`, after
    `check_graph_models`; `load_kwargs` go to every `load_model` call (device, dtype, ...)."""
    from latent.bridge import Bridge
    from latent.loading import load_model

    check_graph_models(g, default)
    names = model_names(g, default)
    loaded: dict[str, LatentModel] = {}
    for name in dict.fromkeys(names.values()):
        loaded[name] = load_model(name, **load_kwargs)
    models = {k: loaded[n] for k, n in names.items()}
    bridges = {}
    for e in g.edges:
        if e.bridge and e.bridge not in bridges:
            bridges[e.bridge] = Bridge.from_pretrained(
                e.bridge, models[g.agent(e.dst).model or "default"].device
            )
    return models, bridges
