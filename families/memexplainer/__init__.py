"""MemExplainer: LRP through TGN memory (backtracking + topology trees) and KL-optimal event selection."""

from .config import MemExplainerConfig
from .data import EventStreams, make_streams
from .explain import (
    NON_EVENT_TERMS,
    Explanation,
    bernoulli_kl_logits,
    choose_events,
    explain_stream,
    explain_streams,
    linearise_gru,
    select_events,
)
from .model import MemTGN, TGNRun, accuracy, train_tgn

__all__ = [
    "NON_EVENT_TERMS",
    "EventStreams",
    "Explanation",
    "MemExplainerConfig",
    "MemTGN",
    "TGNRun",
    "accuracy",
    "bernoulli_kl_logits",
    "choose_events",
    "explain_stream",
    "explain_streams",
    "linearise_gru",
    "make_streams",
    "select_events",
    "train_tgn",
]
