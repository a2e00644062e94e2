"""MORetro*: multi-objective retrosynthesis planning with exact Pareto fronts (arXiv 2605.07521)."""

from .chem import template_expander
from .config import MORetroConfig
from .data import Reaction, exact_front, pareto_filter
from .model import MORetroStar, SearchResult

__all__ = [
    "MORetroConfig",
    "MORetroStar",
    "Reaction",
    "SearchResult",
    "exact_front",
    "pareto_filter",
    "template_expander",
]
