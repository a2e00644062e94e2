"""`ServeConfig`: every setting of `latentworks serve`. Light on purpose (no torch, no web framework), so
`latentworks serve --help` builds its flags instantly and a bad setting fails before a model loads."""

from __future__ import annotations

from dataclasses import dataclass, field

from agents.config import BACKENDS, DEFAULT_LATENT_STEPS, METHODS, default_threads

__all__ = ["ServeConfig"]


@dataclass
class ServeConfig:
    """How `latentworks serve` loads, batches and guards the served agent graphs.

    Example:
        >>> from serve import ServeConfig, create_app
        >>> app = create_app(ServeConfig(model="builtin:arith-mini"))  # then: uvicorn.run(app)
    """

    # What is served: one pipeline per method and graph (`latent_mas:sequential`, ..., `single`)
    model: str = field(metadata={"help": "load_model name or path, e.g. builtin:arith-mini"})
    graph: list[str] = field(
        default_factory=lambda: ["sequential"],
        metadata={"help": "graphs served by latent_mas and text_mas: names or YAML/JSON paths"},
    )
    methods: list[str] = field(
        default_factory=lambda: ["latent_mas", "text_mas", "single"],
        metadata={"help": f"methods served, any of {', '.join(METHODS)}"},
    )
    latent_steps: int = field(default=DEFAULT_LATENT_STEPS, metadata={"help": "latent thoughts per agent"})
    prompts: str = field(default="default", metadata={"help": "prompt set: default, compact or a YAML path"})
    backend: str = field(
        default="hf",
        metadata={"help": "final-agent decoder (vllm needs the [vllm] extra)", "choices": BACKENDS},
    )
    dtype: str | None = field(
        default=None,
        metadata={"help": "model dtype (default: the loader's)", "choices": ("float32", "bfloat16")},
    )
    threads: int = field(default_factory=default_threads, metadata={"help": "torch CPU threads"})
    # Where it listens
    host: str = field(default="127.0.0.1", metadata={"help": "address to bind (0.0.0.0: every interface)"})
    port: int = field(default=8000, metadata={"help": "TCP port"})
    # Batching: requests for the same pipeline and max_tokens that arrive close together run as one batch
    max_batch: int = field(default=16, metadata={"help": "most requests in one batched run"})
    batch_wait_ms: float = field(
        default=10.0, metadata={"help": "how long the first waiting request waits for others to join"}
    )
    max_queue: int = field(
        default=256, metadata={"help": "waiting requests beyond this are answered 429 with Retry-After"}
    )
    # Request limits
    max_tokens: int = field(default=256, metadata={"help": "decode budget when a request gives none"})
    max_tokens_limit: int = field(default=2048, metadata={"help": "largest max_tokens a request may ask"})
    max_body_bytes: int = field(default=1_000_000, metadata={"help": "larger request bodies get 413"})
    max_question_tokens: int = field(
        default=2048, metadata={"help": "longer questions (in the model's tokens) get 400"}
    )

    def __post_init__(self) -> None:
        problems = []
        bad = [m for m in self.methods if m not in METHODS]
        if bad or not self.methods:
            problems.append(f"`methods` must be a non-empty list of {METHODS}, got {self.methods}")
        if not self.graph:
            problems.append("`graph` needs at least one graph name or path")
        if self.backend not in BACKENDS:
            problems.append(f"`backend` must be one of {BACKENDS}, got {self.backend!r}")
        for name in (
            "max_batch",
            "max_queue",
            "max_tokens",
            "max_tokens_limit",
            "max_body_bytes",
            "max_question_tokens",
            "threads",
        ):
            if getattr(self, name) < 1:
                problems.append(f"`{name}` must be >= 1, got {getattr(self, name)}")
        if self.latent_steps < 0:
            problems.append(f"`latent_steps` must be >= 0, got {self.latent_steps}")
        if self.batch_wait_ms < 0:
            problems.append(f"`batch_wait_ms` must be >= 0, got {self.batch_wait_ms}")
        if self.max_tokens > self.max_tokens_limit:
            problems.append(
                f"`max_tokens` ({self.max_tokens}) exceeds `max_tokens_limit` ({self.max_tokens_limit})"
            )
        if not 0 <= self.port <= 65535:
            problems.append(f"`port` must be in 0-65535, got {self.port}")
        if problems:
            raise ValueError("invalid ServeConfig: " + "; ".join(problems) + ".")
