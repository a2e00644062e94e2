"""`LatentModel`: a causal LM seen through its hidden states.

prefill -> LatentState; think (latent thoughts: last hidden -> realign -> next input embedding);
generate (decode text continuing from a state); capture / steer (layer hooks); logit lens.

Shapes: B = batch, T = positions, D = hidden size, V = vocabulary, k = latent steps.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

import torch
from torch import nn
from transformers import PreTrainedModel, PreTrainedTokenizerBase

from latent.cpu_gemv import few_rows_pay, route_few_rows
from latent.hooks import Activations, capture_layers, steer_layer
from latent.kv_cache import new_cache
from latent.masks import check_attention, positional_masks, window_spec
from latent.pad_groups import forward_groups, pad_groups
from latent.realign import REALIGN_METHODS, Aligner, Realigner, SoftTokenAligner
from latent.state import LatentState

LogitsProcessor = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
"""HF-style `(generated_ids (B, n), scores (B, V)) -> scores`."""


class ContextOverflow(ValueError):
    """An input (prompt, latent thoughts and decoded tokens together) runs past `max_position_embeddings`."""


@dataclass
class Generation:
    """Decoded continuation. tokens (B, N) are padded with the pad id after each row's end."""

    tokens: torch.Tensor
    lengths: torch.Tensor  # (B,) tokens generated per row, the end-of-sequence token included
    texts: list[str]
    state: LatentState | None = None


_ENCODER_TYPES = {
    "bert",
    "roberta",
    "xlm-roberta",
    "electra",
    "camembert",
    "ernie",
    "modernbert",
    "deberta-v2",
}


def _unwrap(model: nn.Module) -> PreTrainedModel:
    """The transformers model under a PEFT wrapper (LoRA layers stay injected and active)."""
    get_base = getattr(model, "get_base_model", None)
    return get_base() if callable(get_base) else model


def _decoder_layers(backbone: nn.Module) -> nn.ModuleList:
    for name in ("layers", "h", "blocks"):
        layers = getattr(backbone, name, None)
        if isinstance(layers, nn.ModuleList):
            return layers
    raise TypeError(
        f"cannot find the decoder layers of {type(backbone).__name__} (looked for .layers, .h, .blocks)."
    )


class LatentModel:
    """A HF causal LM + tokenizer with the latent interface.

    Example:
        >>> m = load_model("builtin:arith-mini")
        >>> batch = m.encode(["What is 2 + 3?"], chat=True)
        >>> st = m.prefill(**batch)
        >>> thoughts, st = m.think(st, steps=4)      # (1, 4, D)
        >>> out = m.generate(**m.encode(["Answer:"]), state=st, max_new_tokens=16)
    """

    def __init__(
        self,
        model: PreTrainedModel,
        tokenizer: PreTrainedTokenizerBase,
        realign: str | Aligner = "ridge",
        realign_lambda: float = 1e-5,
    ) -> None:
        hf = _unwrap(model)
        if hf.get_output_embeddings() is None:
            raise ValueError(
                f"{type(hf).__name__} has no language-modelling head: latentworks needs a causal LM "
                "(load it with AutoModelForCausalLM)."
            )
        if getattr(hf.config, "model_type", "") in _ENCODER_TYPES and not getattr(
            hf.config, "is_decoder", False
        ):
            raise ValueError(
                f"{type(hf).__name__} is a bidirectional encoder ({hf.config.model_type}), not a causal LM: "
                "its hidden states see future tokens, so latent thoughts and KV caches are meaningless. "
                "Use a decoder-only model."
            )
        n_rows = hf.get_input_embeddings().weight.shape[0]
        if len(tokenizer) > n_rows:
            raise ValueError(
                f"tokenizer/model vocabulary mismatch: the tokenizer has {len(tokenizer)} tokens but the model's "
                f"embedding has {n_rows} rows. Load the tokenizer that was saved with this model."
            )
        self.model = model.eval()
        self.tokenizer = tokenizer
        tokenizer.padding_side = "left"
        if tokenizer.pad_token_id is None:
            tokenizer.pad_token = tokenizer.eos_token
        self._hf = hf
        self._backbone = getattr(hf, hf.base_model_prefix)
        self._layers = _decoder_layers(self._backbone)
        self._realign = realign
        self._realign_lambda = realign_lambda
        self._aligner: Aligner | None = realign if callable(realign) else None
        if not callable(realign) and realign not in REALIGN_METHODS:
            raise ValueError(f"unknown `realign`={realign!r}: use one of {REALIGN_METHODS} or a callable.")
        self._active_mask: torch.Tensor | None = None
        # read a padded batch in groups of similar length on CPU (`prefill`); False: always in one go
        self.group_pads = True
        if self.device.type == "cpu" and self.dtype == torch.bfloat16 and few_rows_pay():
            route_few_rows(hf)  # few bf16 rows as W @ x^T: faster with AMX only (latent.cpu_gemv)
        # transformers renamed `past_key_values` to `cache` (5.2x); 5.19 silently ignores `cache=`.
        params = inspect.signature(self._backbone.forward).parameters
        self._cache_kw = "cache" if "cache" in params else "past_key_values"
        text_config = hf.config.get_text_config(decoder=True)
        self._windows = window_spec(text_config)
        check_attention(self._windows, getattr(hf.config, "_attn_implementation", None))
        self._max_positions = getattr(text_config, "max_position_embeddings", None)

    # ------------------------------------------------------------------ properties
    @property
    def config(self):
        return self._hf.config

    @property
    def device(self) -> torch.device:
        return self._hf.get_input_embeddings().weight.device

    @property
    def dtype(self) -> torch.dtype:
        return self._hf.get_input_embeddings().weight.dtype

    @property
    def hidden_size(self) -> int:
        return int(self._hf.get_input_embeddings().weight.shape[1])

    @property
    def num_layers(self) -> int:
        return len(self._layers)

    @property
    def relative_positions(self) -> bool:
        """True when positions reach attention only through rotary embeddings (Llama, Qwen, Gemma, ...):
        shifting every position of a sequence by the same offset then leaves its hidden states unchanged,
        so independent states can sit side by side in one cache. False for learned absolute positions
        (GPT-2, OPT)."""
        return getattr(self._hf.config.get_text_config(decoder=True), "rope_parameters", None) is not None

    def empty_state(self, start: torch.Tensor) -> LatentState:
        """A state that holds nothing and gives its next token position `start` (B,) in each row."""
        start = start.to(device=self.device, dtype=torch.long)
        b = int(start.shape[0])
        empty = torch.zeros((b, 0), dtype=torch.long, device=self.device)
        return LatentState(
            cache=new_cache(self._hf),
            attention_mask=empty,
            last_hidden=torch.zeros((b, self.hidden_size), dtype=self.dtype, device=self.device),
            next_position=start.clone(),
            positions=empty.clone(),
        )

    @property
    def aligner(self) -> Aligner:
        """The realignment map, computed once per model in fp32 and cached."""
        if self._aligner is None and self._realign == "soft":
            self._aligner = SoftTokenAligner.from_model(
                self._hf.get_input_embeddings(), self._hf.get_output_embeddings().weight
            )
        if self._aligner is None:
            self._aligner = Realigner.from_model(
                self._hf.get_input_embeddings(),
                self._hf.get_output_embeddings().weight,
                method=str(self._realign),
                lam=self._realign_lambda,
            )
        return self._aligner

    def refresh_aligner(self) -> None:
        """Recompute the ridge/identity map from the current embeddings at next use: training that
        updates the embedding table calls this so thoughts are realigned as a fresh load would."""
        if not callable(self._realign):
            self._aligner = None

    # ------------------------------------------------------------------ inputs
    def encode(
        self,
        prompts: Sequence[str] | Sequence[list[dict]],
        chat: bool = False,
        add_generation_prompt: bool = True,
        add_special_tokens: bool = False,
        chat_template_kwargs: dict | None = None,
    ) -> dict[str, torch.Tensor]:
        """Tokenize a batch (left padding). `chat=True` (or message lists) applies the chat template.

        Plain strings get no special tokens by default, so a segment can continue a state; pass
        `add_special_tokens=True` for text that starts a sequence on models that expect a BOS (Gemma).
        `chat_template_kwargs` reach the template, e.g. `{"enable_thinking": False}` for Qwen3."""
        if isinstance(prompts, str) or not isinstance(prompts, Sequence):
            raise TypeError(
                f"`prompts` must be a list of strings (or of message lists), got {type(prompts).__name__}: "
                "wrap a single prompt in a list."
            )
        if len(prompts) == 0:
            raise ValueError("empty batch: pass at least one prompt.")
        if chat or not isinstance(prompts[0], str):
            msgs = [[{"role": "user", "content": p}] if isinstance(p, str) else p for p in prompts]
            if self.tokenizer.chat_template is None:
                raise ValueError("this tokenizer has no chat template; pass plain strings with `chat=False`.")
            texts = [
                self.tokenizer.apply_chat_template(
                    m,
                    tokenize=False,
                    add_generation_prompt=add_generation_prompt,
                    **(chat_template_kwargs or {}),
                )
                for m in msgs
            ]
        else:
            texts = list(prompts)
        bad = [i for i, t in enumerate(texts) if not isinstance(t, str)]
        if bad:
            raise TypeError(
                f"prompt {bad[0]} is {type(texts[bad[0]]).__name__}, not a string: pass text prompts."
            )
        enc = self.tokenizer(texts, return_tensors="pt", padding=True, add_special_tokens=add_special_tokens)
        return {
            "input_ids": enc["input_ids"].to(self.device),
            "attention_mask": enc["attention_mask"].to(self.device),
        }

    def embed(self, input_ids: torch.Tensor) -> torch.Tensor:
        """Input embeddings (B, T, D) of token ids."""
        return self._hf.get_input_embeddings()(input_ids.to(self.device))

    # ------------------------------------------------------------------ core forward
    def _forward(
        self, embeds: torch.Tensor, mask: torch.Tensor, state: LatentState | None, check: bool = True
    ) -> tuple[torch.Tensor, LatentState]:
        """Run `embeds` (B, t, D) with segment mask (B, t) after `state` (mutated: caller copies).
        `check=False` skips the context check: loops that bounded their positions once before (`_near_limit`)."""
        b, t = mask.shape
        if state is None:
            cache = new_cache(self._hf)
            past_mask = mask.new_zeros((b, 0))
            past_pos = mask.new_zeros((b, 0))
            next_pos = mask.new_zeros((b,))
        else:
            if state.batch_size != b:
                raise ValueError(f"batch size {b} does not match the state's batch size {state.batch_size}.")
            cache, past_mask, next_pos = state.cache, state.attention_mask, state.next_position
            past_pos = state.position_ids()
        positions = (next_pos[:, None] + mask.cumsum(1) - 1).clamp_min(0)  # (B, t); pads reuse a real id
        if check:
            self._check_context(next_pos + mask.sum(1))
        full_mask = torch.cat([past_mask, mask], dim=1)  # (B, T + t)
        full_pos = torch.cat([past_pos, positions], dim=1)
        attention = full_mask
        if self._windows is not None:  # sliding windows counted in real positions, not cache slots
            attention = positional_masks(self._windows, full_mask, full_pos, t, embeds.dtype)
        self._active_mask = full_mask
        try:
            out = self._backbone(
                inputs_embeds=embeds,
                attention_mask=attention,
                position_ids=positions,
                use_cache=True,
                **{self._cache_kw: cache},
            )
        finally:
            self._active_mask = None
        hidden = out.last_hidden_state  # (B, t, D), after the final norm == hidden_states[-1]
        new_state = LatentState(
            cache=cache,
            attention_mask=full_mask,
            last_hidden=hidden[:, -1],
            next_position=next_pos + mask.sum(1),
            positions=full_pos,
        )
        return hidden, new_state

    def _near_limit(self, next_position: torch.Tensor, steps: int) -> bool:
        """Whether `steps` more positions per row could run past the context. Read once before a latent or
        decode loop (one host read), so its steps check the context only when they may overflow: each check
        reads the longest row back to the host, a synchronisation per step on an accelerator."""
        limit = self._max_positions
        return bool(limit) and next_position.numel() > 0 and int(next_position.max()) + steps > limit

    def _check_context(self, lengths: torch.Tensor) -> None:
        limit = self._max_positions
        longest = int(lengths.max()) if lengths.numel() else 0
        if limit and longest > limit:
            raise ContextOverflow(
                f"the input runs past the model's context: {longest} positions > max_position_embeddings "
                f"{limit}. Shorten the prompt, or lower latent steps / max_new_tokens."
            )

    @torch.no_grad()
    def prefill(
        self,
        input_ids: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
        state: LatentState | None = None,
        inputs_embeds: torch.Tensor | None = None,
        in_place: bool = False,
    ) -> LatentState:
        """Read a (left-padded) segment, after `state` if given (which is left unchanged). `in_place=True`
        extends `state`'s cache instead of a copy of it: for a state the caller owns and drops afterwards
        (copying a long KV cache costs as much as a few decode steps)."""
        embeds, mask = self._segment(input_ids, attention_mask, inputs_embeds)
        past = state if state is None or in_place else state.copy()
        groups = pad_groups(mask, self._layers, self.device) if self.group_pads else None
        if groups is not None:
            cache = new_cache(self._hf) if past is None else past.cache
            return forward_groups(self._forward, embeds, mask, past, groups, cache)
        _, new_state = self._forward(embeds, mask, past)
        return new_state

    def _segment(
        self,
        input_ids: torch.Tensor | None,
        attention_mask: torch.Tensor | None,
        inputs_embeds: torch.Tensor | None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        if (input_ids is None) == (inputs_embeds is None):
            raise ValueError("pass exactly one of `input_ids` or `inputs_embeds`.")
        if input_ids is not None:
            if input_ids.ndim != 2 or input_ids.shape[0] == 0 or input_ids.shape[1] == 0:
                raise ValueError(
                    f"`input_ids` must be a non-empty (B, T) tensor, got shape {tuple(input_ids.shape)}."
                )
            embeds = self.embed(input_ids)
        else:
            if inputs_embeds.ndim != 3 or inputs_embeds.shape[0] == 0:
                raise ValueError(
                    f"`inputs_embeds` must be (B, T, D), got shape {tuple(inputs_embeds.shape)}."
                )
            embeds = inputs_embeds.to(device=self.device, dtype=self.dtype)
        if attention_mask is None:
            attention_mask = torch.ones(embeds.shape[:2], dtype=torch.long, device=self.device)
        if attention_mask.shape != embeds.shape[:2]:
            raise ValueError(
                f"`attention_mask` shape {tuple(attention_mask.shape)} != inputs {tuple(embeds.shape[:2])}."
            )
        return embeds, attention_mask.to(device=self.device, dtype=torch.long)

    # ------------------------------------------------------------------ latent thoughts
    @torch.no_grad()
    def think(
        self,
        state: LatentState,
        steps: int,
        aligner: Aligner | None = None,
        return_hidden: bool = False,
        in_place: bool = False,
    ) -> tuple[torch.Tensor, LatentState] | tuple[torch.Tensor, LatentState, torch.Tensor]:
        """Generate `steps` latent thoughts: realign the last hidden state, feed it back as the next input
        embedding, repeat. Returns the k fed-back vectors (B, k, D) and the extended state (the input
        state is unchanged unless `in_place=True`, which extends it instead of a copy, as in `prefill`);
        with `return_hidden=True` also the k raw last-layer hidden states (B, k, D) that produced them
        (what a logit lens reads)."""
        return self._think(state if in_place else state.copy(), steps, aligner, return_hidden)

    def forward_embeds(
        self, inputs_embeds: torch.Tensor, attention_mask: torch.Tensor, state: LatentState | None = None
    ) -> tuple[torch.Tensor, LatentState]:
        """Read a segment of input embeddings (B, t, D) after `state`, with autograd as the caller has it:
        all its last-layer hidden states (B, t, D) and the extended state. Unlike `prefill`, `state` is
        extended in place (copy it first to keep it); latent-aware training reads memory through this,
        exactly as inference does."""
        return self._forward(inputs_embeds, attention_mask.to(self.device), state)

    def think_with_grad(
        self, state: LatentState, steps: int, aligner: Aligner | None = None, return_hidden: bool = False
    ) -> tuple[torch.Tensor, LatentState] | tuple[torch.Tensor, LatentState, torch.Tensor]:
        """`think` with autograd on: the thoughts, the extended state's KV cache and its last hidden state
        carry gradients back into the aligner (an `nn.Module` such as `LinearAligner`), any trainable
        weights of the model (e.g. LoRA) and whatever produced `state`. Used by latent-aware fine-tuning;
        the input state is left unchanged."""
        st = state.copy()
        with torch.enable_grad():
            return self._think(st, steps, aligner, return_hidden)

    def _think(
        self, st: LatentState, steps: int, aligner: Aligner | None, return_hidden: bool
    ) -> tuple[torch.Tensor, LatentState] | tuple[torch.Tensor, LatentState, torch.Tensor]:
        """The thinking loop on `st` (mutated: callers pass a copy)."""
        if not isinstance(steps, int) or steps < 0:
            raise ValueError(f"`steps` must be an integer >= 0, got {steps!r}.")
        align = aligner or self.aligner
        b = st.batch_size
        thoughts, hiddens = [], []
        ones = torch.ones((b, 1), dtype=torch.long, device=self.device)
        check = self._near_limit(st.next_position, steps)  # a step adds one position to every row
        for _ in range(steps):
            hiddens.append(st.last_hidden)
            e = align(st.last_hidden).to(self.dtype)  # (B, D)
            thoughts.append(e)
            _, st = self._forward(e[:, None, :], ones, st, check=check)
        d = self.hidden_size
        stack = (
            torch.stack(thoughts, 1)
            if thoughts
            else torch.zeros((b, 0, d), dtype=self.dtype, device=self.device)
        )
        if return_hidden:
            hid = torch.stack(hiddens, 1) if hiddens else stack.clone()
            return stack, st, hid
        return stack, st

    def logits(self, hidden: torch.Tensor) -> torch.Tensor:
        """Next-token logits (..., V) from last-layer hidden states (..., D)."""
        head = self._hf.get_output_embeddings()
        # (..., V) on the head's device, which `device_map` may put apart from the last layer's
        out = head(hidden.to(device=head.weight.device, dtype=self.dtype)).float()
        cap = getattr(self.config, "final_logit_softcapping", None)
        if cap:
            out = torch.tanh(out / cap) * cap
        return out

    @torch.no_grad()
    def logit_lens(self, hidden: torch.Tensor, k: int = 5) -> list[list[list[tuple[str, float]]]]:
        """For hidden states (B, n, D): the k most likely next tokens and probabilities at each position."""
        probs = self.logits(hidden).softmax(-1)
        top = probs.topk(min(k, probs.shape[-1]), dim=-1)  # a k past the vocabulary keeps every token
        return [
            [
                [(self.tokenizer.decode([int(i)]), float(p)) for i, p in zip(ids, ps)]
                for ids, ps in zip(row_ids, row_ps)
            ]
            for row_ids, row_ps in zip(top.indices, top.values)
        ]

    # ------------------------------------------------------------------ decoding
    @torch.no_grad()
    def generate(
        self,
        input_ids: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
        *,
        state: LatentState | None = None,
        inputs_embeds: torch.Tensor | None = None,
        max_new_tokens: int = 64,
        do_sample: bool = False,
        temperature: float = 1.0,
        top_k: int = 0,
        top_p: float = 1.0,
        logits_processor: Sequence[LogitsProcessor] = (),
        eos_token_id: int | Sequence[int] | None = None,
        generator: torch.Generator | None = None,
        return_state: bool = False,
        in_place: bool = False,
    ) -> Generation:
        """Decode text continuing from `state` (after reading `input_ids` if given). Greedy by default.
        `state` is left unchanged unless `in_place=True` (a state the caller drops afterwards: decoding
        then extends it instead of a copy, as in `prefill`)."""
        if max_new_tokens < 1:
            raise ValueError(f"`max_new_tokens` must be >= 1, got {max_new_tokens}.")
        if input_ids is None and inputs_embeds is None:
            if state is None:
                raise ValueError("nothing to continue from: pass `input_ids`, `inputs_embeds` or `state`.")
            st = state if in_place else state.copy()
        else:
            st = self.prefill(
                input_ids, attention_mask, state=state, inputs_embeds=inputs_embeds, in_place=in_place
            )
        eos = self._eos_ids(eos_token_id)
        b = st.batch_size
        pad = int(self.tokenizer.pad_token_id)
        tokens = torch.full((b, max_new_tokens), pad, dtype=torch.long, device=self.device)
        done = torch.zeros(b, dtype=torch.bool, device=self.device)
        lengths = torch.zeros(b, dtype=torch.long, device=self.device)
        # finished rows leave the batch (each step reads every row's whole cache), unless the caller wants
        # the whole state back or logits processors index the full batch
        compact = not return_state and not logits_processor
        rows = torch.arange(b, device=self.device)  # the batch row of each row of `st`
        check = self._near_limit(st.next_position, max_new_tokens)
        every = _stop_check_every(self.device)
        n = 0
        for n in range(max_new_tokens):
            scores = self.logits(st.last_hidden)  # (B', V), B' = rows still in the batch
            for proc in logits_processor:
                scores = proc(tokens[:, :n].to(scores.device), scores)
            # the head may sit on another device than the embedding (`device_map`): tokens live with the latter
            nxt = self._pick(scores, do_sample, temperature, top_k, top_p, generator).to(self.device)
            was_done = done[rows]
            nxt = torch.where(was_done, torch.full_like(nxt, pad), nxt)
            tokens[rows, n] = nxt
            lengths[rows] += (~was_done).long()
            going = ~(was_done | torch.isin(nxt, eos))  # rows of `st` that have not finished
            done[rows] = ~going
            # finished rows were dropped only once done, so "all done" is "none of `st` going": one host read
            alive = int(going.sum()) if (n + 1) % every == 0 else None
            last = n + 1 == max_new_tokens or alive == 0
            if last and not return_state:
                break
            live = (nxt != pad) | going  # rows still producing real tokens this step
            if compact and alive is not None and _worth_dropping(alive, len(rows)):
                keep = going.nonzero().squeeze(1)
                st = st.select_rows(keep, room=max_new_tokens - n - 1)  # the steps it may still append
                rows, nxt, live = rows[keep], nxt[keep], live[keep]
            _, st = self._forward(self.embed(nxt[:, None]), live.long()[:, None], st, check=check)
            if last:
                break
        # steps run after every row finished (between two reads) only add pad columns: cut them off
        tokens = tokens[:, : n + 1] if every == 1 else tokens[:, : int(lengths.max())]
        texts = self.tokenizer.batch_decode(tokens, skip_special_tokens=True)
        return Generation(tokens=tokens, lengths=lengths, texts=texts, state=st if return_state else None)

    def _eos_ids(self, eos_token_id: int | Sequence[int] | None) -> torch.Tensor:
        ids: list[int] = []
        if eos_token_id is None:
            for src in (
                self.tokenizer.eos_token_id,
                getattr(self._hf.generation_config, "eos_token_id", None),
            ):
                if src is None:
                    continue
                ids.extend([src] if isinstance(src, int) else list(src))
        else:
            ids = [eos_token_id] if isinstance(eos_token_id, int) else list(eos_token_id)
        return torch.tensor(sorted(set(ids)) or [-1], device=self.device)

    @staticmethod
    def _pick(
        scores: torch.Tensor,
        do_sample: bool,
        temperature: float,
        top_k: int,
        top_p: float,
        gen: torch.Generator | None,
    ) -> torch.Tensor:
        if not do_sample:
            return scores.argmax(-1)
        if temperature <= 0:
            raise ValueError(f"`temperature` must be > 0 when sampling, got {temperature}.")
        scores = scores / temperature
        if top_k > 0:
            kth = scores.topk(min(top_k, scores.shape[-1]), dim=-1).values[:, -1:]
            scores = scores.masked_fill(scores < kth, float("-inf"))
        if top_p < 1.0:
            sorted_scores, order = scores.sort(dim=-1, descending=True)
            cum = sorted_scores.softmax(-1).cumsum(-1)
            drop = cum - sorted_scores.softmax(-1) > top_p
            sorted_scores = sorted_scores.masked_fill(drop, float("-inf"))
            scores = torch.full_like(scores, float("-inf")).scatter(-1, order, sorted_scores)
        probs = scores.softmax(-1)
        if gen is not None and gen.device != probs.device:
            # a generator of another device (a CPU one for a GPU model) draws there: the same tokens as
            # on that device, at the price of copying the (B, V) probabilities every step
            return torch.multinomial(probs.to(gen.device), 1, generator=gen).squeeze(-1).to(scores.device)
        return torch.multinomial(probs, 1, generator=gen).squeeze(-1)  # on the device: no copy, no wait

    # ------------------------------------------------------------------ hooks
    def layer_index(self, layer: int | str) -> int:
        """Decoder-layer index from an int (negatives count from the end) or a module path
        such as 'model.layers.3'."""
        n = self.num_layers
        if isinstance(layer, str):
            names = {name: i for i, (name, _) in enumerate(self._layer_names())}
            if layer not in names:
                raise ValueError(
                    f"unknown layer path {layer!r}; decoder layers are e.g. {self._layer_names()[0][0]!r}."
                )
            return names[layer]
        if not -n <= layer < n:
            raise ValueError(
                f"layer index {layer} out of range: this model has {n} decoder layers (0..{n - 1})."
            )
        return layer % n

    def _layer_names(self) -> list[tuple[str, nn.Module]]:
        ids = {id(m): i for i, m in enumerate(self._layers)}
        found = [(name, m) for name, m in self._hf.named_modules() if id(m) in ids]
        return sorted(found, key=lambda x: ids[id(x[1])])

    @contextmanager
    def capture(self, layers: Sequence[int | str], detach: bool = True) -> Iterator[Activations]:
        """Record decoder-layer outputs (B, T, D) per forward call. Layer i's output equals
        `output_hidden_states[i + 1]` for every layer but the last (HF applies the final norm there)."""
        idx = [self.layer_index(x) for x in layers]
        if not idx:
            raise ValueError("`layers` is empty: name at least one decoder layer.")
        with capture_layers({i: self._layers[i] for i in idx}, detach=detach) as acts:
            yield acts

    @contextmanager
    def steer(
        self, layer: int | str, vector: torch.Tensor, alpha: float = 1.0, mode: str = "add"
    ) -> Iterator[None]:
        """Add (`h + alpha v`), ablate (remove the v component) or clamp (set it to alpha) a direction
        at a decoder layer's output, on real positions only when the forward goes through this object."""
        i = self.layer_index(layer)
        if vector.shape[-1] != self.hidden_size or vector.ndim != 1:
            raise ValueError(
                f"steering `vector` must have shape ({self.hidden_size},), got {tuple(vector.shape)}."
            )
        if not torch.isfinite(vector).all():
            raise ValueError("steering `vector` contains NaN or inf.")
        try:
            finite = math.isfinite(float(alpha))
        except (TypeError, ValueError):
            finite = False
        if not finite:
            raise ValueError(f"steering `alpha` must be a finite number, got {alpha!r}.")
        with steer_layer(self._layers[i], vector, alpha, mode, mask_getter=lambda: self._active_mask):
            yield

    # ------------------------------------------------------------------ token scores
    @torch.no_grad()
    def forward_tokens(
        self,
        input_ids: torch.Tensor,
        state: LatentState | None = None,
        attention_mask: torch.Tensor | None = None,
        *,
        in_place: bool = False,
    ) -> tuple[torch.Tensor, LatentState]:
        """Logits (B, t, V) of (left-padded) `input_ids` read after `state`, and the state holding them.

        The same forward as `prefill`/`generate`, so `steer` edits real positions only and the cache
        keyword matches the installed transformers. `state` is left unchanged unless `in_place=True`
        (a decode loop that extends one cache without copying it)."""
        embeds, mask = self._segment(input_ids, attention_mask, None)
        if state is not None and not in_place:
            state = state.copy()
        hidden, new_state = self._forward(embeds, mask, state)
        return self.logits(hidden), new_state

    @torch.no_grad()
    def token_logprobs(
        self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None
    ) -> torch.Tensor:
        """log p(token t+1 | tokens up to t), shape (B, T-1), teacher-forced through `forward_tokens`;
        0 where either token is padding (left padding keeps the real tokens last)."""
        logits, _ = self.forward_tokens(input_ids, attention_mask=attention_mask)
        ids = input_ids.to(logits.device)
        logp = logits[:, :-1].log_softmax(-1).gather(-1, ids[:, 1:, None]).squeeze(-1)
        if attention_mask is None:
            return logp
        mask = attention_mask.to(logits.device).bool()
        return logp.masked_fill(~(mask[:, 1:] & mask[:, :-1]), 0.0)

    def weight_bytes(self) -> dict[str, int]:
        """Bytes of the decoder layers' weights and of the LM head: what one cached step reads from memory.
        A latent step reads only the layers, a decode step both; at small batch a step is bound by reading
        them, so their ratio bounds what skipping the LM head can buy."""
        layers = sum(p.numel() * p.element_size() for layer in self._layers for p in layer.parameters())
        head = self._hf.get_output_embeddings().weight
        return {"layers": layers, "lm_head": head.numel() * head.element_size()}


STOP_CHECK_EVERY = 8
"""Decode steps between two reads of "has every row finished?" on an accelerator. Each read waits for the
device to finish the step; at most this many steps less one run after the last row ended (pads, dropped)."""


def _stop_check_every(device: torch.device) -> int:
    """How often the decode loop reads back whether rows finished: every step on a CPU (a read is free
    there), every `STOP_CHECK_EVERY` steps on an accelerator, where each read waits for the device."""
    return 1 if device.type == "cpu" else STOP_CHECK_EVERY


def _worth_dropping(alive: int, rows: int) -> bool:
    """Drop finished rows from a decoding batch once a quarter of it has finished: selecting the live rows
    copies their cache, which costs about one step, so it pays only when the batch shrinks enough."""
    return alive < rows and (rows - alive) * 4 >= rows


def decoder_layers(model: nn.Module) -> nn.ModuleList:
    """The decoder-layer list of a causal LM, its backbone, or a PEFT-wrapped one (`.layers`, `.h` or
    `.blocks` under the base-model prefix). Raises TypeError naming the class when there is none."""
    hf = _unwrap(model)
    backbone = getattr(hf, getattr(hf, "base_model_prefix", ""), None) or hf
    try:
        return _decoder_layers(backbone)
    except TypeError:
        return _decoder_layers(hf)
