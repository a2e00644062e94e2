"""agents: LatentMAS (latent thoughts handed on through a shared KV working memory) and its baselines.

import agents
from latent import load_model
results = agents.run("sequential", load_model("builtin:arith-mini"), questions, method="latent_mas")

Names load on first use, so `agents.config` and `agents.graph` stay importable without torch.
"""

import importlib

_HOMES = {
    "DEFAULT_LATENT_STEPS": "agents.config",
    "METHODS": "agents.config",
    "RunConfig": "agents.config",
    "HANDOFF_MODES": "agents.graph",
    "Agent": "agents.graph",
    "Edge": "agents.graph",
    "Graph": "agents.graph",
    "run": "agents.latentmas",
    "PromptSet": "agents.prompts",
    "AgentStats": "agents.results",
    "Result": "agents.results",
}

__all__ = sorted(_HOMES)


def __getattr__(name: str):
    if name not in _HOMES:
        raise AttributeError(f"module 'agents' has no attribute {name!r}")
    value = getattr(importlib.import_module(_HOMES[name]), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_HOMES))
