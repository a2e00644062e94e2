"""LatentMAS and its baselines on any agent graph, in one readable file.

latent_mas (arXiv 2511.20639): agents run in topological order. Each reads what its incoming edges
hand on (the shared working memory through `kv`/`latent` views, or upstream text through `text`
edges), reads its own prompt, then thinks `latent_steps` latent thoughts (last hidden state ->
realign -> next input embedding) that stay in the memory. Only the final agent decodes text.
text_mas: the same graph and prompts, but every agent decodes text and hands it on in the prompt.
single: the final agent alone, with the same prompt.

One batch runs `_run_batch`: for each agent, `_read_incoming` -> `_write_prompt` -> `_decode` or
`_think` -> `_finish`, each step filling one `AgentStep`.
"""

from __future__ import annotations

import logging
import time
import zlib
from dataclasses import dataclass, field

import torch

from agents.config import DEFAULT_LATENT_STEPS, METHODS, RunConfig
from agents.graph import Edge, Graph
from agents.handoff import route_shares
from agents.inputs import check_questions
from agents.prompts import PromptSet
from agents.results import AgentStats, Result
from latent.bridge import Bridge
from latent.memory import WorkingMemory
from latent.model import LatentModel
from latent.realign import RandomThoughts
from latent.state import LatentState
from latent.thinking import ThinkingBudget, template_thinks, think_ids

logger = logging.getLogger(__name__)

__all__ = [
    "DEFAULT_LATENT_STEPS",
    "METHODS",
    "AgentStep",
    "RunConfig",
    "final_agent_view",
    "question_in_memory",
    "resolve_models",
    "run",
]

Context = list[tuple[str, str]]  # [(agent, text)] one row read or wrote


def run(
    graph: str | Graph,
    model: LatentModel | dict[str, LatentModel],
    questions: list[str],
    method: str = "latent_mas",
    config: RunConfig | None = None,
    shares: list[list[str]] | None = None,
    bridges: dict[str, Bridge] | None = None,
    **overrides,
) -> list[Result]:
    """Run `method` on `graph` for every question; returns one `Result` per question, in order.

    `shares` (hand-off tasks): per question, one text per upstream agent in graph order; agent i reads
    its own share before the question, and no other agent reads it (the final agent never does).
    `model` may map the graph's model keys (`Agent.model`, "default" for none) to models; a `latent` edge
    between two models reads through the bridge it names (`Edge.bridge`), taken from `bridges` (bridge name
    -> `Bridge`) or loaded by name.

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
    models, edge_bridges = resolve_models(g, model, bridges, with_bridges=True)
    routed = route_shares(g, shares, len(questions))
    if cfg.thoughts in ("other", "mean") and cfg.method == "latent_mas":
        if any(len(questions[s : s + cfg.batch_size]) < 2 for s in range(0, len(questions), cfg.batch_size)):
            raise ValueError(
                f"thoughts={cfg.thoughts!r} mixes the rows of a batch, but a batch of {cfg.batch_size} leaves a "
                "batch of one question; pick a batch_size that leaves no single-question batch."
            )
    if cfg.threads is not None:
        torch.set_num_threads(cfg.threads)
    fan_in = _memory_fan_in(g) if cfg.backend == "vllm" and cfg.method == "latent_mas" else None
    if fan_in:
        raise ValueError(
            f"graph {g.name!r} joins the memories of independent agents ({fan_in}): the vLLM "
            "backend re-reads the memory as one sequence, which matches the HF path only for a single chain "
            "of kv/latent hand-offs. Use backend='hf' for this graph."
        )
    decoder = _vllm_decoder(models[g.final], cfg) if cfg.backend == "vllm" else None
    results: list[Result] = []
    batches = range(0, len(questions), cfg.batch_size)
    if cfg.progress:
        from tqdm.auto import tqdm

        batches = tqdm(batches, desc=f"{cfg.method}/{g.name}", unit="batch")
    for i, start in enumerate(batches):
        chunk = questions[start : start + cfg.batch_size]
        # on the final agent's device, so sampling draws there (a CPU generator would copy B x V per step)
        gen = torch.Generator(models[g.final].device).manual_seed(cfg.seed + i) if cfg.do_sample else None
        part = {a: rows[start : start + cfg.batch_size] for a, rows in routed.items()}
        results.extend(_run_batch(g, models, chunk, cfg, prompts, gen, decoder, part, edge_bridges))
    return results


def resolve_models(
    g: Graph,
    model: LatentModel | dict[str, LatentModel],
    bridges: dict[str, Bridge] | None = None,
    with_bridges: bool = False,
):
    """Agent name -> model, checked before anything runs: every `kv` edge, and every `latent` edge without
    a bridge, must join models that can read each other's KV cache (same tokenizer, hidden size, layers and
    KV heads); a `latent` edge with a bridge must join two such different models of the bridge's widths.
    Every problem is named in one error. `with_bridges=True` also returns (src, dst) -> `Bridge`."""
    if isinstance(model, LatentModel):
        model = {a.model or "default": model for a in g.agents}
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
    problems, edge_bridges = [], {}
    for e in g.edges:
        if e.mode == "text":
            continue
        pair = f"models {g.agent(e.src).model or 'default'!r} and {g.agent(e.dst).model or 'default'!r}"
        why = None if out[e.src] is out[e.dst] else _kv_incompatibility(out[e.src], out[e.dst])
        if e.bridge and why is None:
            problems.append(
                f"latent edge {e.src}->{e.dst} names bridge {e.bridge!r} but joins {pair}, which share a "
                "cache: drop `bridge`"
            )
        elif e.bridge:
            try:
                bridge = (bridges or {}).get(e.bridge) or Bridge.from_pretrained(e.bridge, out[e.dst].device)
            except FileNotFoundError as err:
                problems.append(f"latent edge {e.src}->{e.dst}: {str(err).rstrip('.')}")
                continue
            bad = bridge.check(out[e.src], out[e.dst])
            if bad:
                problems.append(
                    f"latent edge {e.src}->{e.dst} joins {pair}, but bridge {e.bridge!r} does not fit: {bad}"
                )
            edge_bridges[(e.src, e.dst)] = bridge
        elif why:
            problems.append(cross_model_problem(e, pair, why))
    if problems:
        raise ValueError("models cannot share latent memory: " + "; ".join(problems) + ".")
    return (out, edge_bridges) if with_bridges else out


def cross_model_problem(e: Edge, pair: str, why: str) -> str:
    """What is wrong with a `kv`/`latent` edge between two models whose caches differ, and the fix."""
    fix = (
        "name a trained bridge on the edge (`bridge: NAME`; `latentworks finetune mas --sender SENDER "
        "--base RECEIVER` trains one) or make it a `text` edge"
    )
    if e.mode == "kv":
        fix = (
            "kv edges cannot cross models (a kv edge hands on the cache, and the caches differ): make it a "
            f"`latent` edge and {fix.removesuffix(' or make it a `text` edge')}, or a `text` edge"
        )
    return f"{e.mode} edge {e.src}->{e.dst} joins {pair} ({why}): {fix}"


def _kv_incompatibility(a: LatentModel, b: LatentModel) -> str | None:
    ca, cb = a.config, b.config
    for attr in ("hidden_size", "num_hidden_layers", "num_key_value_heads"):
        va, vb = getattr(ca, attr, None), getattr(cb, attr, None)
        if va != vb:
            return f"different {attr} ({va} vs {vb})"
    if a.tokenizer.get_vocab() != b.tokenizer.get_vocab():
        return "different tokenizers"
    return None


@dataclass
class _Batch:
    """What a batch carries from one agent to the next."""

    questions: list[str]
    memory: WorkingMemory
    holds: dict[str, list[int]] = field(default_factory=dict)  # agent -> memory segments it holds
    texts: dict[str, list[Context]] = field(default_factory=dict)  # agent -> per row: text read/written
    bridges: dict[tuple[str, str], Bridge] = field(default_factory=dict)  # cross-model latent edges
    final_text: list[str] = field(default_factory=list)
    shares: dict[str, list[str | None]] = field(default_factory=dict)  # agent -> per row: its own share

    @property
    def size(self) -> int:
        return len(self.questions)


@dataclass
class AgentStep:
    """One agent's turn over a batch: what it read, the memory it holds, and its per-row stats."""

    name: str
    role: str
    model: LatentModel
    stats: list[AgentStats]
    context: list[Context]  # per row: upstream text read in the prompt
    visible: list[int]  # memory segments it reads, in creation (= topological) order
    state: LatentState | None = None
    own: list[int] = field(default_factory=list)  # segments its state holds after the turn
    bridged: dict[int, Bridge] = field(default_factory=dict)  # segments it reads through a bridge
    started: float = field(default_factory=time.perf_counter)

    def record(self, attr: str, values) -> None:
        for stats, value in zip(self.stats, values, strict=True):
            setattr(stats, attr, value)


def _run_batch(
    g: Graph,
    models: dict[str, LatentModel],
    questions: list[str],
    cfg: RunConfig,
    prompts: PromptSet,
    gen: torch.Generator | None,
    decoder,
    shares: dict[str, list[str | None]] | None = None,
    bridges: dict[tuple[str, str], Bridge] | None = None,
) -> list[Result]:
    batch = _Batch(questions, WorkingMemory(models[g.final]), final_text=[""] * len(questions))
    batch.shares, batch.bridges = dict(shares or {}), dict(bridges or {})
    order = [g.final] if cfg.method == "single" else g.order()
    steps = []
    for name in order:
        step = _read_incoming(g, models, name, cfg, batch)
        ablate = cfg.thoughts if name == g.final and cfg.thoughts in ("other", "mean") else None
        _write_prompt(step, cfg, prompts, batch, question_in_memory(g, name, cfg.method), ablate)
        outgoing = [e for e in g.edges if e.src == name]
        if name == g.final or cfg.method == "text_mas" or any(e.mode == "text" for e in outgoing):
            _decode(step, outgoing, cfg, gen, decoder if name == g.final else None, name == g.final, batch)
        elif cfg.latent_steps > 0:
            _think(step, cfg, batch)
        _finish(step, batch)
        steps.append(step)
    return [
        Result(q, batch.final_text[r], cfg.method, g.name, [s.stats[r] for s in steps])
        for r, q in enumerate(questions)
    ]


def final_agent_view(
    graph: str | Graph,
    model: LatentModel | dict[str, LatentModel],
    questions: list[str],
    config: RunConfig,
    memory: WorkingMemory | None = None,
    shares: list[list[str]] | None = None,
    bridges: dict[str, Bridge] | None = None,
) -> tuple[list[list[dict]], LatentState | None]:
    """latent_mas up to the final agent: every upstream agent reads its view of the memory, writes its
    prompt and thinks, exactly as `run` does. Returns the final agent's chat messages and the state it
    reads before its prompt (None when it reads no memory). Latent-aware training scores the final
    agent's answer after this state; a `WorkingMemory(model, grad=True)` keeps the whole path
    differentiable."""
    if config.method != "latent_mas":
        raise ValueError(f"`final_agent_view` runs latent_mas, got method {config.method!r}.")
    check_questions(questions)
    g = Graph.resolve(graph)
    prompts = PromptSet.load(config.prompts)
    models, batch_bridges = resolve_models(g, model, bridges, with_bridges=True)
    batch = _Batch(questions, memory or WorkingMemory(models[g.final]), final_text=[""] * len(questions))
    batch.shares, batch.bridges = route_shares(g, shares, len(questions)), batch_bridges
    for name in g.order():
        step = _read_incoming(g, models, name, config, batch)
        if name == g.final:
            again = question_in_memory(g, name, config.method)
            msgs = [prompts.messages(step.role, q, step.context[r], again) for r, q in enumerate(questions)]
            return msgs, batch.memory.state_for(step.visible, step.model, step.bridged)
        if any(e.mode == "text" for e in g.edges if e.src == name):
            raise ValueError(f"agent {name!r} hands on text: `final_agent_view` needs kv/latent edges only.")
        _write_prompt(step, config, prompts, batch, question_in_memory(g, name, config.method))
        if config.latent_steps > 0:
            _think(step, config, batch)
        _finish(step, batch)
    raise AssertionError("the final agent is always in the order")


def question_in_memory(graph: Graph, name: str, method: str) -> bool:
    """True when agent `name` reads an upstream prompt from the latent memory (an incoming `kv` edge
    under latent_mas): the question is then already in what it reads."""
    return method == "latent_mas" and any(e.mode == "kv" for e in graph.incoming(name))


def _memory_fan_in(g: Graph) -> str | None:
    """The first agent that reads the memories of two upstream agents neither of which reads the other's
    (a side-by-side fan-in), or None when every memory hand-off is one chain."""
    reads = {a.name: {e.src for e in g.incoming(a.name) if e.mode != "text"} for a in g.agents}
    ancestors: dict[str, set[str]] = {}
    for name in g.order():
        ancestors[name] = (
            set().union(*({src} | ancestors[src] for src in reads[name])) if reads[name] else set()
        )
    for name in g.order():
        srcs = sorted(reads[name])
        for i, a in enumerate(srcs):
            if any(a not in ancestors[b] and b not in ancestors[a] for b in srcs[i + 1 :]):
                return name
    return None


def _reads_text(edge: Edge, cfg: RunConfig) -> bool:
    return cfg.method == "text_mas" or edge.mode == "text"


def _read_incoming(
    g: Graph, models: dict[str, LatentModel], name: str, cfg: RunConfig, batch: _Batch
) -> AgentStep:
    """Step 1: the upstream text (text hand-offs) and memory segments (kv/latent) this agent reads."""
    context: list[Context] = [[] for _ in range(batch.size)]
    visible: list[int] = []
    bridged: dict[int, Bridge] = {}
    for e in g.incoming(name) if cfg.method != "single" else []:
        if _reads_text(e, cfg):
            for r, upstream in enumerate(batch.texts.get(e.src, [[]] * batch.size)):
                context[r].extend(t for t in upstream if t not in context[r])
        else:
            seen = [s for s in batch.memory.view(batch.holds[e.src], e.mode) if s not in visible]
            visible.extend(seen)
            if (e.src, e.dst) in batch.bridges:  # another model's thoughts, read through the edge's bridge
                bridged.update(dict.fromkeys(seen, batch.bridges[(e.src, e.dst)]))
    role = g.agent(name).role
    stats = [AgentStats(name=name, role=role) for _ in range(batch.size)]
    return AgentStep(name, role, models[name], stats, context, sorted(visible), bridged=bridged)


def _messages(step: AgentStep, prompts: PromptSet, batch: _Batch, in_memory: bool) -> list[list[dict]]:
    own = batch.shares.get(step.name, [None] * batch.size)
    return [
        prompts.messages(step.role, q, step.context[r], in_memory, share=own[r])
        for r, q in enumerate(batch.questions)
    ]


def _write_prompt(
    step: AgentStep,
    cfg: RunConfig,
    prompts: PromptSet,
    batch: _Batch,
    in_memory: bool = False,
    ablate: str | None = None,
) -> None:
    """Step 2: the agent's own prompt, written after the memory it reads (latent_mas) or alone.
    `ablate` ("other" or "mean"): the memory read is another row's, or the batch mean (controls)."""
    enc = step.model.encode(
        _messages(step, prompts, batch, in_memory), chat_template_kwargs=_template_kwargs(cfg)
    )
    state = (
        batch.memory.state_for(step.visible, step.model, step.bridged) if cfg.method == "latent_mas" else None
    )
    if state is not None and ablate == "other":
        state = state.select_rows(derangement(batch.size, cfg.seed))
    elif state is not None and ablate == "mean":
        state = state.mean_rows()
    if state is not None:
        per_pos = state.nbytes / max(state.batch_size * state.length, 1)
        real = state.attention_mask.sum(1)
        step.record("memory_positions", [int(n) for n in real])
        step.record("kv_bytes_in", [int(n * per_pos) for n in real])
    step.state, pid = batch.memory.write_tokens(
        step.name,
        "prompt",
        enc["input_ids"],
        enc["attention_mask"],
        state,
        step.visible,
        step.model,
        owned=True,
    )
    step.own = [*step.visible, pid]
    step.record("prompt_tokens", [int(n) for n in enc["attention_mask"].sum(1)])


def _decode(
    step: AgentStep,
    outgoing: list[Edge],
    cfg: RunConfig,
    gen: torch.Generator | None,
    decoder,
    is_final: bool,
    batch: _Batch,
) -> None:
    """Step 3a: decode text; a latent_mas agent with kv/latent out-edges also writes it to memory."""
    out = None
    writes_text = cfg.method == "latent_mas" and any(e.mode != "text" for e in outgoing) and not is_final
    if decoder is not None:
        texts, lengths = decoder(batch.memory, step.own, step.state)
    else:
        # a state no later agent reads is decoded in place (the memory stops holding it); one whose text
        # goes into the memory must keep its prompt state for that write
        state = step.state if writes_text else batch.memory.release(step.state)
        budget = thinking_budget(step.model, cfg)
        out = step.model.generate(
            state=state,
            in_place=not writes_text,
            max_new_tokens=cfg.max_new_tokens + (budget.budget if budget else 0),
            do_sample=cfg.do_sample,
            temperature=cfg.temperature,
            top_p=cfg.top_p,
            generator=gen,
            logits_processor=[budget] if budget else (),
        )
        texts, lengths = out.texts, out.lengths.tolist()
    step.record("output_tokens", [int(n) for n in lengths])
    step.record("text", texts)
    if is_final:
        batch.final_text = list(texts)
    elif writes_text and out is not None:
        ids, mask = _left_align(out.tokens, out.lengths, step.model.tokenizer.pad_token_id)
        step.state, tid = batch.memory.write_tokens(
            step.name, "text", ids, mask, step.state, step.own, step.model
        )
        step.own.append(tid)
    batch.texts[step.name] = [ctx + [(step.name, t)] for ctx, t in zip(step.context, texts)]


def _think(step: AgentStep, cfg: RunConfig, batch: _Batch) -> None:
    """Step 3b: `latent_steps` latent thoughts that stay in the shared memory (same-norm random vectors
    instead under the `thoughts="random"` ablation)."""
    aligner = None
    if cfg.thoughts == "random":
        aligner = RandomThoughts(step.model.aligner, cfg.seed + zlib.crc32(step.name.encode()))
    step.state, lid = batch.memory.write_latent(
        step.name, step.state, cfg.latent_steps, step.own, step.model, aligner=aligner, owned=True
    )
    step.own.append(lid)
    step.record("latent_steps", [cfg.latent_steps] * batch.size)
    if cfg.inspect_latents:
        step.record(
            "latent_tokens", step.model.logit_lens(batch.memory.segments[lid].hidden, k=cfg.inspect_latents)
        )


def _finish(step: AgentStep, batch: _Batch) -> None:
    """Step 4: what the agent's state holds for its successors, and its share of the batch's time."""
    batch.holds[step.name] = step.own
    step.record("wall_s", [(time.perf_counter() - step.started) / batch.size] * batch.size)


def _template_kwargs(cfg: RunConfig) -> dict | None:
    """What the chat template is told: the thinking switch, when the run sets it."""
    return None if cfg.enable_thinking is None else {"enable_thinking": cfg.enable_thinking}


def thinking_budget(model: LatentModel, cfg: RunConfig) -> ThinkingBudget | None:
    """The budget processor of a decoding agent whose answers open with a `<think>` block (None when they
    do not): it thinks up to `thinking_budget` tokens, then has `max_new_tokens` for the answer."""
    if not template_thinks(model.tokenizer, cfg.enable_thinking):
        return None
    return ThinkingBudget(*think_ids(model.tokenizer), cfg.thinking_budget)


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


def derangement(n: int, seed: int) -> torch.Tensor:
    """A permutation of n >= 2 rows with no fixed point: row r reads row perm[r] (`thoughts="other"`)."""
    if n < 2:
        raise ValueError("thoughts='other' needs batches of at least 2 questions (each reads another's).")
    g = torch.Generator().manual_seed(seed)
    order = torch.randperm(n, generator=g)
    shift = int(torch.randint(1, n, (1,), generator=g))
    perm = torch.empty(n, dtype=torch.long)
    perm[order] = order[(torch.arange(n) + shift) % n]
    return perm


def _vllm_decoder(model: LatentModel, cfg: RunConfig):
    from agents.vllm_backend import VLLMDecoder

    return VLLMDecoder(model, cfg)
