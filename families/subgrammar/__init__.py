"""Learning dynamics of LMs on context-free grammars via subgrammars (arXiv 2510.02524).

Import is cheap: transformers and nltk load only when a model is built or a string is parsed.
"""

from .config import SubgrammarConfig
from .data import finite_pcfg, three_subgrammar_pcfg
from .grammar import PCFG, Sample, kl_decomposition
from .model import (
    TrainResult,
    Vocab,
    build_model,
    grammar_alignment,
    linear_cka,
    token_logprobs,
    train_and_track,
)

__all__ = [
    "PCFG",
    "Sample",
    "SubgrammarConfig",
    "TrainResult",
    "Vocab",
    "build_model",
    "finite_pcfg",
    "grammar_alignment",
    "kl_decomposition",
    "linear_cka",
    "three_subgrammar_pcfg",
    "token_logprobs",
    "train_and_track",
]
