"""agents: LatentMAS (latent thoughts handed on through a shared KV working memory) and its baselines.

import agents
from latent import load_model
results = agents.run("sequential", load_model("builtin:arith-mini"), questions, method="latent_mas")

Names load on first use, so `agents.config` and `agents.graph` stay importable without torch.
"""

import lazy_loader

__getattr__, __dir__, __all__ = lazy_loader.attach(
    __name__,
    submod_attrs={
        "config": ["DEFAULT_LATENT_STEPS", "METHODS", "RunConfig"],
        "graph": ["Agent", "Edge", "Graph", "HANDOFF_MODES"],
        "graph_models": ["check_graph_models", "load_graph_models"],
        "handoff": ["handoff_graph", "route_shares", "upstream_agents"],
        "latentmas": ["final_agent_view", "question_in_memory", "run"],
        "prompts": ["PromptSet"],
        "results": ["AgentStats", "Result"],
    },
)
