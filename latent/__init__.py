"""latent: the one hidden-state interface (KV caches, hidden states, hooks) shared by every module.

from latent import load_model
m = load_model("builtin:arith-mini")
st = m.prefill(**m.encode(["What is 2 + 3?"], chat=True))
thoughts, st = m.think(st, steps=4)

Names load on first use, so a light submodule (e.g. `latent.smoke`'s flags) imports no torch.
"""

import lazy_loader

__getattr__, __dir__, __all__ = lazy_loader.attach(
    __name__,
    submod_attrs={
        "catalogue": [
            "CATALOGUE",
            "BuiltinModel",
            "builtin_path",
            "cache_dir",
            "is_pulled",
            "list_builtin_models",
            "pulled_path",
        ],
        "loading": ["load_model", "native_bf16_cpu", "resolve_model_path"],
        "pull": ["PullError", "pull_model"],
        "model": ["Generation", "LatentModel"],
        "realign": ["RandomThoughts", "Realigner", "TrainableAligner", "ridge_matrix"],
        "state": ["LatentState"],
    },
)
