"""latent: the one hidden-state interface (KV caches, hidden states, hooks) shared by every module.

from latent import load_model
m = load_model("builtin:arith-mini")
st = m.prefill(**m.encode(["What is 2 + 3?"], chat=True))
thoughts, st = m.think(st, steps=4)
"""

from latent.catalogue import CATALOGUE, cache_dir, is_pulled, pulled_path
from latent.loading import BuiltinModel, builtin_path, list_builtin_models, load_model, resolve_model_path
from latent.model import Generation, LatentModel
from latent.pull import PullError, pull_model
from latent.realign import Realigner, TrainableAligner, ridge_matrix
from latent.state import LatentState

__all__ = [
    "CATALOGUE",
    "BuiltinModel",
    "Generation",
    "LatentModel",
    "LatentState",
    "Realigner",
    "TrainableAligner",
    "PullError",
    "builtin_path",
    "cache_dir",
    "is_pulled",
    "list_builtin_models",
    "load_model",
    "pull_model",
    "pulled_path",
    "resolve_model_path",
    "ridge_matrix",
]
