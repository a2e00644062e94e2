"""latent: the one hidden-state interface (KV caches, hidden states, hooks) shared by every module.

from latent import load_model
m = load_model("builtin:arith-mini")
st = m.prefill(**m.encode(["What is 2 + 3?"], chat=True))
thoughts, st = m.think(st, steps=4)
"""

from latent.loading import BuiltinModel, builtin_path, list_builtin_models, load_model
from latent.model import Generation, LatentModel
from latent.realign import Realigner, ridge_matrix
from latent.state import LatentState

__all__ = [
    "BuiltinModel",
    "Generation",
    "LatentModel",
    "LatentState",
    "Realigner",
    "builtin_path",
    "list_builtin_models",
    "load_model",
    "ridge_matrix",
]
