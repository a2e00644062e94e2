"""agents: LatentMAS (latent thoughts handed on through a shared KV working memory) and its baselines.

import agents
from latent import load_model
results = agents.run("sequential", load_model("builtin:arith-mini"), questions, method="latent_mas")
"""

from agents.graph import HANDOFF_MODES, Agent, Edge, Graph
from agents.latentmas import DEFAULT_LATENT_STEPS, METHODS, RunConfig, run
from agents.prompts import PromptSet
from agents.results import AgentStats, Result

__all__ = [
    "DEFAULT_LATENT_STEPS",
    "HANDOFF_MODES",
    "METHODS",
    "Agent",
    "AgentStats",
    "Edge",
    "Graph",
    "PromptSet",
    "Result",
    "RunConfig",
    "run",
]
