"""LatentMAS and its baselines on any agent graph, in one readable file.

latent_mas (arXiv 2511.20639): agents run in topological order. Each reads what its incoming edges
hand on (the shared working memory through `kv`/`latent` views, or upstream text through `text`
edges), reads its own prompt, then thinks `latent_steps` latent thoughts (last hidden state ->
realign -> next input embedding) that stay in the memory. Only the final agent decodes text.
text_mas: the same graph and prompts, but every agent decodes text and hands it on in the prompt.
single: the final agent alone, with the same prompt.

Default latent steps: 20. The paper sweeps 0-80 latent steps and the authors' released run script and
early README used 20 ("20-40 works well"); their later CLI default of 0 silently discards all upstream
memory (their pitfall P1), so we never default to it. Tune per task with `latent_steps=`.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

import torch

from agents.graph import Graph
from agents.inputs import check_questions
from agents.prompts import PromptSet
from agents.results import AgentStats, Result
from latent.memory import WorkingMemory
from latent.model import LatentModel

logger = logging.getLogger(__name__)

METHODS = ("single", "text_mas", "latent_mas")
DEFAULT_LATENT_STEPS = 20


@dataclass
class RunConfig:
    """How `agents.run` executes a graph. Same fields drive the Python API and the CLI."""

    # Method
    method: str = "latent_mas"
    latent_steps: int = DEFAULT_LATENT_STEPS
    prompts: str = "default"  # prompt-set name under agents/prompts/ or a YAML path
    # Decoding (final agent; also every agent of text_mas)
    max_new_tokens: int = 256
    do_sample: bool = False
    temperature: float = 0.6
    top_p: float = 0.95
    seed: int = 0
    # Execution
    batch_size: int = 8
    backend: str = "hf"  # final-agent decoder: "hf" or "vllm"
    inspect_latents: int = 0  # >0: logit-lens top-k tokens for every latent thought
    progress: bool = False

    def __post_init__(self) -> None:
        problems = []
        if self.method not in METHODS:
            problems.append(f"`method` must be one of {METHODS}, got {self.method!r}")
        if not isinstance(self.latent_steps, int) or self.latent_steps < 0:
            problems.append(f"`latent_steps` must be an integer >= 0, got {self.latent_steps!r}")
        if self.max_new_tokens < 1:
            problems.append(f"`max_new_tokens` must be >= 1, got {self.max_new_tokens}")
        if self.batch_size < 1:
            problems.append(f"`batch_size` must be >= 1, got {self.batch_size}")
        if self.backend not in ("hf", "vllm"):
            problems.append(f"`backend` must be 'hf' or 'vllm', got {self.backend!r}")
        if problems:
            raise ValueError("invalid RunConfig: " + "; ".join(problems) + ".")


def run(
    graph: str | Graph,
    model: LatentModel | dict[str, LatentModel],
    questions: list[str],
    method: str = "latent_mas",
    config: RunConfig | None = None,
    **overrides,
) -> list[Result]:
    """Run `method` on `graph` for every question; returns one `Result` per question, in order.

    Example:
        >>> from latent import load_model
        >>> import agents
        >>> m = load_model("builtin:arith-mini")
        >>> res = agents.run("sequential", m, ["Tom has 3 apples and buys 4 more. How many?"])
        >>> res[0].text, res[0].output_tokens
    """
    check_questions(questions)
    cfg = config or RunConfig(method=method, **overrides)
    if config is not None and (overrides or method != "latent_mas"):
        raise ValueError("pass either `config=` or keyword settings, not both.")
    g = Graph.resolve(graph)
    prompts = PromptSet.load(cfg.prompts)
    for a in g.agents:
        if a.role not in prompts.system:
            raise ValueError(f"agent {a.name!r} has role {a.role!r}, which prompt set {cfg.prompts!r} lacks.")
    models = resolve_models(g, model)
    decoder = _vllm_decoder(models[g.final], cfg) if cfg.backend == "vllm" else None
    results: list[Result] = []
    batches = range(0, len(questions), cfg.batch_size)
    if cfg.progress:
        from tqdm.auto import tqdm

        batches = tqdm(batches, desc=f"{cfg.method}/{g.name}", unit="batch")
    for i, start in enumerate(batches):
        chunk = questions[start : start + cfg.batch_size]
        gen = torch.Generator().manual_seed(cfg.seed + i) if cfg.do_sample else None
        results.extend(_run_batch(g, models, chunk, cfg, prompts, gen, decoder))
    return results


def resolve_models(g: Graph, model: LatentModel | dict[str, LatentModel]) -> dict[str, LatentModel]:
    """Agent name -> model, checked before anything runs: every `kv`/`latent` edge must join models
    that can read each other's KV cache (same tokenizer, hidden size, layers and KV heads)."""
    if isinstance(model, LatentModel):
        return {a.name: model for a in g.agents}
    if not isinstance(model, dict):
        raise TypeError(f"`model` must be a LatentModel or a dict of them, got {type(model).__name__}.")
    out = {}
    for a in g.agents:
        key = a.model or "default"
        if key not in model:
            raise ValueError(
                f"agent {a.name!r} asks for model {key!r}, which is not in `model` ({sorted(model)})."
            )
        out[a.name] = model[key]
    problems = []
    for e in g.edges:
        if e.mode == "text" or out[e.src] is out[e.dst]:
            continue
        a, b = out[e.src], out[e.dst]
        why = _kv_incompatibility(a, b)
        if why:
            problems.append(f"{e.mode} edge {e.src}->{e.dst}: {why}")
    if problems:
        raise ValueError(
            "models cannot share latent memory: " + "; ".join(problems) + ". Use a `text` edge instead."
        )
    return out


def _kv_incompatibility(a: LatentModel, b: LatentModel) -> str | None:
    ca, cb = a.config, b.config
    for attr in ("hidden_size", "num_hidden_layers", "num_key_value_heads"):
        va, vb = getattr(ca, attr, None), getattr(cb, attr, None)
        if va != vb:
            return f"different {attr} ({va} vs {vb})"
    if a.tokenizer.get_vocab() != b.tokenizer.get_vocab():
        return "different tokenizers"
    return None


def _run_batch(g, models, questions, cfg, prompts, gen, decoder) -> list[Result]:
    b = len(questions)
    stats = [{} for _ in range(b)]  # row -> agent name -> AgentStats
    texts_seen: dict[
        str, list[list[tuple[str, str]]]
    ] = {}  # agent -> row -> [(agent, text)] it read or wrote
    final = g.final
    order = [final] if cfg.method == "single" else g.order()
    mem = WorkingMemory(models[final])
    holds: dict[str, list[int]] = {}  # agent -> memory segment ids its state holds after it ran
    final_text: list[str] = [""] * b

    for name in order:
        agent = g.agent(name)
        model = models[name]
        t0 = time.perf_counter()
        # 1. What the incoming edges hand on.
        text_ctx: list[list[tuple[str, str]]] = [[] for _ in range(b)]
        visible: list[int] = []
        if cfg.method != "single":
            for e in g.incoming(name):
                if cfg.method == "text_mas" or e.mode == "text":
                    for r in range(b):
                        text_ctx[r].extend(
                            t for t in texts_seen.get(e.src, [[]] * b)[r] if t not in text_ctx[r]
                        )
                else:
                    visible.extend(s for s in mem.view(holds[e.src], e.mode) if s not in visible)
        visible.sort()  # creation order = topological order
        row_stats = [AgentStats(name=name, role=agent.role) for _ in range(b)]
        # 2. The agent's own prompt, after the memory it reads.
        msgs = [prompts.messages(agent.role, q, text_ctx[r]) for r, q in enumerate(questions)]
        enc = model.encode(msgs)
        state = mem.state_for(visible, model) if cfg.method == "latent_mas" else None
        if state is not None:
            per_pos = state.nbytes / max(state.batch_size * state.length, 1)
            real = state.attention_mask.sum(1)
            for r in range(b):
                row_stats[r].memory_positions = int(real[r])
                row_stats[r].kv_bytes_in = int(real[r] * per_pos)
        state, pid = mem.write_tokens(
            name, "prompt", enc["input_ids"], enc["attention_mask"], state, visible, model
        )
        own = [*visible, pid]
        for r in range(b):
            row_stats[r].prompt_tokens = int(enc["attention_mask"][r].sum())
        # 3. Think in latent space, or decode text.
        outgoing = [e for e in g.edges if e.src == name]
        decodes = name == final or cfg.method == "text_mas" or any(e.mode == "text" for e in outgoing)
        if decodes:
            if name == final and decoder is not None:
                out_texts, lengths = decoder(mem, own, state)
                out = None
            else:
                out = model.generate(
                    state=state,
                    max_new_tokens=cfg.max_new_tokens,
                    do_sample=cfg.do_sample,
                    temperature=cfg.temperature,
                    top_p=cfg.top_p,
                    generator=gen,
                )
                out_texts, lengths = out.texts, out.lengths.tolist()
            for r in range(b):
                row_stats[r].output_tokens = int(lengths[r])
                row_stats[r].text = out_texts[r]
            if name == final:
                final_text = list(out_texts)
            elif cfg.method == "latent_mas" and any(e.mode != "text" for e in outgoing) and out is not None:
                ids, mask = _left_align(out.tokens, out.lengths, model.tokenizer.pad_token_id)
                state, tid = mem.write_tokens(name, "text", ids, mask, state, own, model)
                own.append(tid)
            texts_seen[name] = [text_ctx[r] + [(name, out_texts[r])] for r in range(b)]
        elif cfg.latent_steps > 0:
            state, lid = mem.write_latent(name, state, cfg.latent_steps, own, model)
            own.append(lid)
            for r in range(b):
                row_stats[r].latent_steps = cfg.latent_steps
            if cfg.inspect_latents:
                lens = model.logit_lens(mem.segments[lid].hidden, k=cfg.inspect_latents)
                for r in range(b):
                    row_stats[r].latent_tokens = lens[r]
        holds[name] = own
        dt = (time.perf_counter() - t0) / b
        for r in range(b):
            row_stats[r].wall_s = dt
            stats[r][name] = row_stats[r]
    return [
        Result(
            question=q,
            text=final_text[r],
            method=cfg.method,
            graph=g.name,
            agents=[stats[r][n] for n in order],
        )
        for r, q in enumerate(questions)
    ]


def _left_align(tokens: torch.Tensor, lengths: torch.Tensor, pad: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Right-padded decoded tokens (B, N) -> left-padded ids and mask, so the last position is real."""
    b, n = tokens.shape
    ids = torch.full_like(tokens, pad)
    mask = torch.zeros_like(tokens)
    for r in range(b):
        k = int(lengths[r])
        if k:
            ids[r, n - k :] = tokens[r, :k]
            mask[r, n - k :] = 1
    return ids, mask


def _vllm_decoder(model: LatentModel, cfg: RunConfig):
    from agents.vllm_backend import VLLMDecoder

    return VLLMDecoder(model, cfg)
