"""Typed results returned by `agents.run`: one `Result` per question, with per-agent accounting."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field


@dataclass
class AgentStats:
    """What one agent cost for one question.

    prompt_tokens: real tokens of its own prompt (text hand-offs included, since they are in the prompt).
    memory_positions: positions of shared memory it read (latent_mas; 0 otherwise).
    output_tokens: tokens it decoded (0 for agents that think in latent space).
    latent_steps: latent thoughts it generated.
    kv_bytes_in: KV-cache bytes of the memory handed to it (real positions only).
    wall_s: this agent's share of the batch's wall time (batch time / batch size).
    """

    name: str
    role: str
    prompt_tokens: int = 0
    memory_positions: int = 0
    output_tokens: int = 0
    latent_steps: int = 0
    kv_bytes_in: int = 0
    wall_s: float = 0.0
    text: str | None = None
    latent_tokens: list[list[tuple[str, float]]] | None = None  # logit lens per thought, when asked


@dataclass
class Result:
    """The final answer text for one question, and how it was reached."""

    question: str
    text: str
    method: str
    graph: str
    agents: list[AgentStats] = field(default_factory=list)

    @property
    def output_tokens(self) -> int:
        """System-wide decoded tokens (the paper's token count)."""
        return sum(a.output_tokens for a in self.agents)

    @property
    def wall_s(self) -> float:
        return sum(a.wall_s for a in self.agents)

    def to_dict(self) -> dict:
        d = asdict(self)
        d["output_tokens"] = self.output_tokens
        d["wall_s"] = self.wall_s
        return d
