"""latent: the one hidden-state interface (KV caches, hidden states, hooks) shared by every module.

from latent import load_model
m = load_model("builtin:arith-mini")
st = m.prefill(**m.encode(["What is 2 + 3?"], chat=True))
thoughts, st = m.think(st, steps=4)

Names load on first use, so a light submodule (e.g. `latent.smoke`'s flags) imports no torch.
"""

import importlib

_HOMES = {
    "CATALOGUE": "latent.catalogue",
    "cache_dir": "latent.catalogue",
    "is_pulled": "latent.catalogue",
    "pulled_path": "latent.catalogue",
    "resolve_model_path": "latent.loading",
    "PullError": "latent.pull",
    "pull_model": "latent.pull",
    "BuiltinModel": "latent.catalogue",
    "builtin_path": "latent.catalogue",
    "list_builtin_models": "latent.catalogue",
    "load_model": "latent.loading",
    "Generation": "latent.model",
    "LatentModel": "latent.model",
    "Realigner": "latent.realign",
    "ridge_matrix": "latent.realign",
    "LatentState": "latent.state",
}

__all__ = sorted(_HOMES)


def __getattr__(name: str):
    if name not in _HOMES:
        raise AttributeError(f"module 'latent' has no attribute {name!r}")
    value = getattr(importlib.import_module(_HOMES[name]), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_HOMES))
