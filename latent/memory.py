"""Latent working memory: who wrote every position, the views agents read, and the caches behind them.

A *segment* is what one agent wrote in one go: its prompt tokens, its latent thoughts or its decoded
text, stored as the input embeddings that were fed (B, L, D) plus the pad mask (B, L). A *context* is an
ordered list of segment ids; the memory turns a context into a `LatentState` in the cheapest exact way:

1. the context is exactly what some agent's state holds -> copy that state;
2. it is a subset of one state's positions (e.g. the `latent` view) -> select those positions; every key
   keeps the position it was computed at and new tokens continue after the highest one, so relative
   positions stay true (the official code's truncation re-used positions);
3. it joins states that were computed independently (hierarchical fan-in) -> concatenate their caches.
   This is position-correct because a context that reads nothing starts after every position the memory
   has handed out so far, in any row (on rotary models, where such a shift leaves the hidden states
   unchanged):
   independent states never overlap, and side by side they hold consecutive, increasing positions. Each
   expert's keys and values are handed on exactly as it computed them, without recomputation;
4. anything else (overlapping positions, or learned absolute positions such as GPT-2's) -> re-prefill the
   concatenated input embeddings with fresh, consecutive positions.

A prompt that reads nothing reads the token prefix its rows share (the agent's system prompt) once and
copies it into every row (`latent.shared_prefix`); its segment is then laid out [prefix][pads][rest].

Shapes: B = batch, L = segment length, D = hidden size.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import torch

from latent.bridge import Bridge
from latent.kv_cache import cache_from_parts, layer_tensors
from latent.model import LatentModel
from latent.realign import Aligner
from latent.shared_prefix import split_shared_prefix
from latent.state import LatentState

KINDS = ("prompt", "latent", "text")


def _same(x: torch.Tensor) -> torch.Tensor:
    return x


def _uniform_start(state: LatentState | None) -> bool:
    """True when a prompt after `state` can share its rows' common prefix: nothing read yet, and every
    row starts at the same position (one prefix read serves them all)."""
    if state is None:
        return True
    return state.length == 0 and bool((state.next_position == state.next_position[0]).all())


@dataclass
class Segment:
    """One agent's contribution: `kind` is prompt, latent or text."""

    agent: str
    kind: str
    embeds: torch.Tensor  # (B, L, D) input embeddings that were fed
    mask: torch.Tensor  # (B, L) 1 = real position
    token_ids: torch.Tensor | None = None  # (B, L) for prompt/text segments
    hidden: torch.Tensor | None = None  # (B, L, D) last-layer states that produced latent thoughts

    @property
    def length(self) -> int:
        return int(self.mask.shape[1])


@dataclass
class _Placed:
    """A state plus where each of its segments sits in the cache: seg id -> (start, end)."""

    state: LatentState
    layout: dict[int, tuple[int, int]]


@dataclass
class WorkingMemory:
    """Shared latent working memory of one batch of questions.

    Example:
        >>> mem = WorkingMemory(model)
        >>> st = mem.state_for([])                       # empty context
        >>> st, pid = mem.write_tokens("planner", "prompt", ids, mask, st, context=[])
        >>> st, lid = mem.write_latent("planner", st, steps=8, context=[pid])
        >>> mem.view([pid, lid], "latent")               # -> [lid]
    """

    model: LatentModel
    segments: list[Segment] = field(default_factory=list)
    _placed: list[_Placed] = field(default_factory=list)
    reprefills: int = 0
    # True: every write and read keeps autograd (latent-aware training runs the same memory as inference)
    grad: bool = False
    # True: a prompt that reads nothing reads the token prefix all rows share once (`latent.shared_prefix`)
    share_prefixes: bool = True

    # ------------------------------------------------------------------ writing
    def write_tokens(
        self,
        agent: str,
        kind: str,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor,
        state: LatentState | None,
        context: list[int],
        model: LatentModel | None = None,
        owned: bool = False,
    ) -> tuple[LatentState, int]:
        """Read tokens (a prompt, or decoded text) after `state` (which holds exactly `context`).
        `owned=True` says the caller drops `state` afterwards (it came from `state_for`, or is one this
        memory returned and `release`s), so it is extended in place rather than copied."""
        if kind not in ("prompt", "text"):
            raise ValueError(f"token segments are 'prompt' or 'text', got {kind!r}.")
        model = model or self.model
        if owned and state is not None:
            self.release(state)
        if state is None:
            state, owned = self._fresh_start(model, int(input_ids.shape[0])), True
        split = None
        if self.share_prefixes and not self.grad and _uniform_start(state):
            split = split_shared_prefix(input_ids, attention_mask, int(model.tokenizer.pad_token_id))
        if split is not None:
            input_ids, attention_mask = split.input_ids, split.attention_mask
        embeds = model.embed(input_ids)
        if self.grad:
            _, new = model.forward_embeds(embeds, attention_mask, state.copy() if state is not None else None)
        elif split is not None:
            head = None if state is None else model.empty_state(state.next_position[:1])
            n = split.length
            head = model.prefill(
                inputs_embeds=embeds[:1, :n], attention_mask=attention_mask[:1, :n], state=head, in_place=True
            )
            rows = head.repeat_rows(int(input_ids.shape[0]))
            new = model.prefill(
                inputs_embeds=embeds[:, n:], attention_mask=attention_mask[:, n:], state=rows, in_place=True
            )
        else:
            new = model.prefill(
                inputs_embeds=embeds, attention_mask=attention_mask, state=state, in_place=owned
            )
        seg = Segment(agent, kind, embeds, attention_mask.to(embeds.device), token_ids=input_ids)
        return new, self._record(seg, new, context)

    def write_latent(
        self,
        agent: str,
        state: LatentState,
        steps: int,
        context: list[int],
        model: LatentModel | None = None,
        aligner: Aligner | None = None,
        owned: bool = False,
    ) -> tuple[LatentState, int | None]:
        """Generate `steps` latent thoughts after `state` and record them (None if steps == 0).
        `aligner` replaces the model's realignment for these thoughts (e.g. an ablation's stand-in).
        `owned=True`, as in `write_tokens`: the thoughts extend `state` in place (the memory `release`s
        it if it holds it), instead of a copy of it; a memory with gradients always thinks on a copy."""
        model = model or self.model
        if self.grad:
            thoughts, new, hidden = model.think_with_grad(state, steps, aligner=aligner, return_hidden=True)
        else:
            if owned:
                self.release(state)
            thoughts, new, hidden = model.think(
                state, steps, aligner=aligner, return_hidden=True, in_place=owned
            )
        if steps == 0:
            return new, None
        mask = torch.ones(thoughts.shape[:2], dtype=torch.long, device=thoughts.device)
        return new, self._record(Segment(agent, "latent", thoughts, mask, hidden=hidden), new, context)

    def release(self, state: LatentState) -> LatentState:
        """Stop holding `state` (one that `write_tokens`/`write_latent` returned) and hand it to the caller,
        who may now extend it in place (`prefill`, `think`, `generate` with `in_place=True`) instead of
        copying it. Its segments stay readable: `state_for` serves them from a longer state that holds
        them, or re-reads their stored embeddings."""
        self._placed = [p for p in self._placed if p.state is not state]
        return state

    def _fresh_start(self, model: LatentModel, batch: int) -> LatentState | None:
        """Where a context that reads nothing begins: after the highest position of every state written so
        far (in any row), so that states computed independently can later be joined by concatenation. One
        start for every row lets the rows share the prompt's common prefix (`share_prefixes`)."""
        if not self._placed or not model.relative_positions:
            return None
        clock = max(int(p.state.next_position.max()) for p in self._placed)
        return model.empty_state(torch.full((batch,), clock, dtype=torch.long))

    def _record(self, seg: Segment, state: LatentState, context: list[int]) -> int:
        seg_id = len(self.segments)
        self.segments.append(seg)
        layout, pos = {}, 0
        for sid in [*context, seg_id]:
            layout[sid] = (pos, pos + self.segments[sid].length)
            pos += self.segments[sid].length
        assert pos == state.length, (pos, state.length)
        self._placed.append(_Placed(state, layout))
        return seg_id

    # ------------------------------------------------------------------ reading
    def view(self, context: list[int], mode: str) -> list[int]:
        """The part of `context` a reader sees through an edge: `kv` = all, `latent` = latent segments."""
        if mode == "kv":
            return list(context)
        if mode == "latent":
            return [s for s in context if self.segments[s].kind == "latent"]
        raise ValueError(f"unknown hand-off view {mode!r}: memory views are 'kv' or 'latent'.")

    def state_for(
        self, context: list[int], model: LatentModel | None = None, bridges: dict[int, Bridge] | None = None
    ) -> LatentState | None:
        """A state holding exactly the segments of `context`, in order (None for an empty context).
        `model` re-prefills a context that cannot be served exactly (default: the memory's model).
        `bridges` (segment id -> `Bridge`): those segments are another model's thoughts, read through the
        bridge into `model`'s input space; a context holding one is re-prefilled whole (caches never
        cross models)."""
        context = list(context)
        if not context:
            return None
        if bridges and any(s in bridges for s in context):
            return self._reprefill(context, model or self.model, bridges)
        for placed in reversed(self._placed):  # newest first: the longest reusable prefix
            if list(placed.layout) == context:
                return placed.state.copy()
        groups = []
        start = 0
        while start < len(context):  # the longest run one state serves, then the next run
            for end in range(len(context), start, -1):
                part = self._serving(context[start:end])
                if part is not None:
                    break
            else:
                break
            groups.append(part)
            start = end
        if start == len(context) and self._disjoint(groups):
            return self._joined(groups)
        return self._reprefill(context, model or self.model)

    def _serving(self, part: list[int]) -> tuple[LatentState, torch.Tensor] | None:
        """(state, cache index) of the newest state that holds every segment of `part`, in order."""
        for placed in reversed(self._placed):
            if all(s in placed.layout for s in part) and self._in_order(placed, part):
                idx = torch.cat([torch.arange(*placed.layout[s]) for s in part])
                return placed.state, idx
        return None

    @staticmethod
    def _disjoint(groups: list[tuple[LatentState, torch.Tensor]]) -> bool:
        """True when, in every row, each group's kept positions all lie before the next group's."""
        for (a, ia), (b, ib) in zip(groups, groups[1:]):
            ia, ib = ia.to(a.attention_mask.device), ib.to(b.attention_mask.device)
            a_pos, a_real = a.position_ids()[:, ia], a.attention_mask[:, ia].bool()
            b_pos, b_real = b.position_ids()[:, ib], b.attention_mask[:, ib].bool()
            a_max = a_pos.masked_fill(~a_real, -1).amax(1)
            b_min = b_pos.masked_fill(~b_real, torch.iinfo(b_pos.dtype).max).amin(1)
            if not bool((a_max < b_min).all()):
                return False
        return True

    def _joined(self, groups: list[tuple[LatentState, torch.Tensor]]) -> LatentState:
        """The kept positions of one state, or of side-by-side states (positions disjoint and increasing),
        as one state. Keys keep the positions they were computed at: the next token goes after the highest
        kept one."""
        layers, masks, positions = [], [], []
        for state, idx in groups:
            idx = idx.to(state.attention_mask.device)
            whole = idx.numel() == state.length
            layers.append(
                [
                    (k, v) if whole else (k.index_select(2, idx), v.index_select(2, idx))
                    for k, v in layer_tensors(state.cache)
                ]
            )
            masks.append(state.attention_mask[:, idx])
            positions.append(state.position_ids()[:, idx])

        def cat(parts: list[torch.Tensor], dim: int) -> torch.Tensor:
            return torch.cat(parts, dim=dim) if len(parts) > 1 else parts[0]

        last, _ = groups[-1]
        return LatentState(
            cache_from_parts(layers),
            cat(masks, 1),
            last.last_hidden.clone(),
            last.next_position.clone(),
            cat(positions, 1),
        )

    @staticmethod
    def _in_order(placed: _Placed, context: list[int]) -> bool:
        starts = [placed.layout[s][0] for s in context]
        return starts == sorted(starts)

    def embeddings(
        self, context: list[int], bridges: dict[int, Bridge] | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """The input embeddings (B, sum L, D) and pad mask (B, sum L) of `context`, in order; a segment in
        `bridges` is mapped through its bridge first."""
        bridges = bridges or {}
        parts = [(bridges[s] if s in bridges else _same)(self.segments[s].embeds) for s in context]
        dtype, device = parts[-1].dtype, parts[-1].device
        embeds = torch.cat([p.to(device=device, dtype=dtype) for p in parts], dim=1)
        mask = torch.cat([self.segments[s].mask.to(device) for s in context], dim=1)
        return embeds, mask

    def _reprefill(
        self, context: list[int], model: LatentModel, bridges: dict[int, Bridge] | None = None
    ) -> LatentState:
        self.reprefills += 1
        with torch.set_grad_enabled(self.grad):  # a bridge is a module: no graph at inference
            embeds, mask = self.embeddings(context, bridges)
        embeds = embeds.to(device=model.device, dtype=model.dtype)
        if self.grad:
            return model.forward_embeds(embeds, mask, None)[1]
        return model.prefill(inputs_embeds=embeds, attention_mask=mask)

    # ------------------------------------------------------------------ accounting and inspection
    def nbytes(self, context: list[int]) -> int:
        """KV bytes that a state holding `context` occupies (what a hand-off of it costs)."""
        n_pos = sum(self.segments[s].length for s in context)
        if not self._placed:
            return 0
        ref = self._placed[-1].state
        return ref.nbytes * n_pos // max(ref.length, 1)

    def owners(self, context: list[int]) -> list[tuple[str, str]]:
        """(agent, kind) of every position of a state holding `context`, in cache order."""
        return [
            (self.segments[s].agent, self.segments[s].kind)
            for s in context
            for _ in range(self.segments[s].length)
        ]

    def save(self, path: str | Path) -> None:
        """Write every segment (embeddings, masks, token ids, latent hidden states) to safetensors."""
        from safetensors.torch import save_file

        tensors, meta = {}, {}
        for i, seg in enumerate(self.segments):
            tensors[f"{i}.embeds"] = seg.embeds.detach().float().cpu().contiguous()
            tensors[f"{i}.mask"] = seg.mask.cpu().contiguous()
            if seg.token_ids is not None:
                tensors[f"{i}.token_ids"] = seg.token_ids.cpu().contiguous()
            if seg.hidden is not None:
                tensors[f"{i}.hidden"] = seg.hidden.detach().float().cpu().contiguous()
            meta[str(i)] = f"{seg.agent}\t{seg.kind}"
        save_file(tensors, str(path), metadata=meta)

    @staticmethod
    def load_segments(path: str | Path) -> list[Segment]:
        """Read the segments written by `save` (for inspection; no model needed)."""
        from safetensors import safe_open

        out = []
        with safe_open(str(path), framework="pt") as f:
            meta = f.metadata() or {}
            keys = set(f.keys())
            for i in range(len(meta)):
                agent, kind = meta[str(i)].split("\t")
                get = lambda k: f.get_tensor(k) if k in keys else None  # noqa: E731
                out.append(
                    Segment(
                        agent,
                        kind,
                        get(f"{i}.embeds"),
                        get(f"{i}.mask"),
                        get(f"{i}.token_ids"),
                        get(f"{i}.hidden"),
                    )
                )
        return out
