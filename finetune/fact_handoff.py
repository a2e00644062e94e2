"""Information-asymmetry task: a fact that only the upstream agent sees, handed on to the final agent.

Two agents, `reader -> answerer`. Both get the same question ("What is Ann's locker code?"); only the
reader's system prompt states the fact ("Ann's locker code is 47."). The answerer can answer only from
what the edge hands on, so its accuracy measures how much information the hand-off carries
(chance: 1 in 90 two-digit numbers).

Hand-offs (`run_handoff`), all through the `latent/` interface and the working memory's views, as
`agents.run` executes a `reader -> answerer` graph:
- `single`: the answerer alone (no hand-off; the floor);
- `text_mas`: the reader decodes text, the answerer reads it in its prompt;
- `latent_mas`: the reader thinks k latent thoughts after its prompt; a `latent` edge hands on only
  those positions (their KV, prompt hidden) and the answerer reads its prompt after them.
Ablations of `latent_mas` (`ABLATIONS`):
- `random_thoughts`: same-norm random vectors fed in place of the thoughts (still after the prompt);
- `other_question`: the memory of a different question of the batch (rows deranged);
- `thoughts_only`: the real thought vectors re-read on their own, without the reader's prompt in
  their keys/values (what the thoughts themselves carry);
- `gold_text` (a ceiling, not an ablation): the answerer reads the fact itself as the previous agent's
  text, so it shows whether the answerer can answer at all once the information reaches it.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass

import torch

from agents.graph import Graph
from agents.prompts import PromptSet
from latent.kv_cache import cache_from_tensors, layer_tensors
from latent.memory import WorkingMemory
from latent.model import LatentModel
from latent.realign import RandomThoughts
from latent.state import LatentState

NAMES = ("Ann", "Ben", "Mia", "Sam", "Lily", "Max", "Emma", "Leo", "Zoe", "Noah", "Ava", "Tom")
ITEMS = ("locker code", "room number", "bus number", "lucky number", "house number", "seat number")

READER_SYSTEM = "You are the reader. You know this fact: {fact} Tell the next agent what it needs to answer."
ANSWERER_SYSTEM = "You are the answerer. Answer the question with the number only."
USER = "{question}"
USER_WITH_CONTEXT = "{question}\n\nFrom a previous agent:\n{context}"

GRAPH_SPEC = {
    "name": "fact-handoff",
    "agents": [{"name": "reader", "role": "reader"}, {"name": "answerer", "role": "answerer"}],
    "edges": [{"src": "reader", "dst": "answerer", "mode": "latent"}],
}
METHODS = ("single", "text_mas", "latent_mas")
ABLATIONS = ("random_thoughts", "other_question", "thoughts_only", "gold_text")


@dataclass(frozen=True)
class FactProblem:
    fact: str  # "Ann's locker code is 47."
    question: str  # "What is Ann's locker code?"
    answer: int


def make_problems(n: int, seed: int) -> list[FactProblem]:
    """`n` problems from `seed` (train and test use different seeds)."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        name, item, value = rng.choice(NAMES), rng.choice(ITEMS), rng.randint(10, 99)
        out.append(FactProblem(f"{name}'s {item} is {value}.", f"What is {name}'s {item}?", value))
    return out


def prompt_set(problem: FactProblem | None = None) -> PromptSet:
    """The prompt set of one problem (the reader's system prompt holds its fact)."""
    fact = problem.fact if problem is not None else "{fact}"
    return PromptSet(
        system={"reader": READER_SYSTEM.format(fact=fact), "answerer": ANSWERER_SYSTEM},
        user=USER,
        user_with_context=USER_WITH_CONTEXT,
        context_item="{text}",
        context_separator="\n\n",
    )


def graph() -> Graph:
    return Graph.from_dict(GRAPH_SPEC)


def reader_messages(p: FactProblem) -> list[dict]:
    return prompt_set(p).messages("reader", p.question)


def answerer_messages(p: FactProblem, context: str | None = None) -> list[dict]:
    return prompt_set(p).messages("answerer", p.question, [("reader", context)] if context else None)


_INT_RE = re.compile(r"-?\d+")


def extract_answer(text: str) -> int | None:
    """The first integer in the answer text, or None."""
    m = _INT_RE.search(text)
    return int(m.group()) if m else None


# ----------------------------------------------------------------------------- hand-offs


def reader_memory(
    model: LatentModel, problems: list[FactProblem], steps: int, aligner=None
) -> tuple[WorkingMemory, int, int]:
    """The reader's prompt then `steps` latent thoughts, in a fresh working memory: (memory, prompt id,
    latent id)."""
    mem = WorkingMemory(model)
    enc = model.encode([reader_messages(p) for p in problems])
    st, pid = mem.write_tokens("reader", "prompt", enc["input_ids"], enc["attention_mask"], None, [], model)
    # with `aligner`: an ablation's stand-in thoughts, recorded like real ones
    st, lid = mem.write_latent("reader", st, steps, [pid], model, aligner=aligner)
    return mem, pid, lid


def permute_rows(model: LatentModel, state: LatentState, perm: torch.Tensor) -> LatentState:
    """The same memory with its batch rows reordered (row r gets row perm[r])."""
    perm = perm.to(state.attention_mask.device)
    tensors = [(k.index_select(0, perm), v.index_select(0, perm)) for k, v in layer_tensors(state.cache)]
    return LatentState(
        cache=cache_from_tensors(model.model, tensors),
        attention_mask=state.attention_mask[perm],
        last_hidden=state.last_hidden[perm],
        next_position=state.next_position[perm],
        positions=None if state.positions is None else state.positions[perm],
    )


def derangement(n: int, seed: int) -> torch.Tensor:
    """A permutation of n >= 2 rows with no fixed point (each row gets another question's memory)."""
    if n < 2:
        raise ValueError("the `other_question` ablation needs batches of at least 2 questions.")
    g = torch.Generator().manual_seed(seed)
    shift = int(torch.randint(1, n, (1,), generator=g))
    order = torch.randperm(n, generator=g)
    perm = torch.empty(n, dtype=torch.long)
    perm[order] = order[(torch.arange(n) + shift) % n]
    return perm


def answerer_state(
    model: LatentModel, problems: list[FactProblem], method: str, steps: int, seed: int = 0
) -> tuple[LatentState | None, list[str | None]]:
    """What the answerer reads before its prompt (a state, or None) and the text context per row."""
    b = len(problems)
    if method == "single":
        return None, [None] * b
    if method == "text_mas":
        raise ValueError("text_mas decodes; use `run_handoff`.")
    aligner = RandomThoughts(model.aligner, seed) if method == "random_thoughts" else None
    mem, pid, lid = reader_memory(model, problems, steps, aligner)
    if method == "thoughts_only":
        embeds, mask = mem.embeddings([lid])
        return model.prefill(inputs_embeds=embeds, attention_mask=mask), [None] * b
    state = mem.state_for(mem.view([pid, lid], "latent"), model)
    if method == "other_question":
        state = permute_rows(model, state, derangement(b, seed))
    elif method not in ("latent_mas", "random_thoughts"):
        raise ValueError(f"unknown hand-off {method!r}: use one of {METHODS + ABLATIONS}.")
    return state, [None] * b


def run_handoff(
    model: LatentModel,
    problems: list[FactProblem],
    method: str,
    steps: int = 8,
    max_new_tokens: int = 8,
    reader_tokens: int = 24,
    batch_size: int = 16,
    seed: int = 0,
) -> list[str]:
    """The answerer's text for every problem under hand-off `method` (greedy decoding)."""
    if method not in METHODS + ABLATIONS:
        raise ValueError(f"unknown hand-off {method!r}: use one of {METHODS + ABLATIONS}.")
    texts: list[str] = []
    for start in range(0, len(problems), batch_size):
        chunk = problems[start : start + batch_size]
        if method == "text_mas":
            note = model.generate(
                **model.encode([reader_messages(p) for p in chunk]), max_new_tokens=reader_tokens
            )
            state, ctx = None, note.texts
        elif method == "gold_text":
            state, ctx = None, [p.fact for p in chunk]
        else:
            state, ctx = answerer_state(model, chunk, method, steps, seed + start)
        enc = model.encode([answerer_messages(p, c) for p, c in zip(chunk, ctx)])
        out = model.generate(**enc, state=state, max_new_tokens=max_new_tokens)
        texts.extend(out.texts)
    return texts


def donors(problems: list[FactProblem], batch_size: int = 16, seed: int = 0) -> list[FactProblem]:
    """For the `other_question` ablation: whose memory each problem's answerer read."""
    out = []
    for start in range(0, len(problems), batch_size):
        chunk = problems[start : start + batch_size]
        perm = derangement(len(chunk), seed + start)
        out.extend(chunk[int(i)] for i in perm)
    return out


def score(problems: list[FactProblem], texts: list[str]) -> list[bool]:
    return [extract_answer(t) == p.answer for p, t in zip(problems, texts)]
