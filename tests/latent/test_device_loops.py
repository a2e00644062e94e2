"""The latent and decode loops on an accelerator, checked on a CPU: no host read per step, sampling where
the scores are, tokens on the embedding's device, a model spread with `device_map`."""

import sys
from contextlib import contextmanager
from pathlib import Path

import pytest
import torch

import latent.model as lm
from latent.loading import load_model
from latent.model import ContextOverflow

PROMPTS = ["Tom has 23 apples.", "Mia had 12 pencils and gave 5 to Leo. Then she found"]
LATENT_DIR = str(Path(lm.__file__).parent)


@contextmanager
def host_reads():
    """Count reads of tensor values back to Python (`int()`, `bool()`, `.item()`, `.tolist()`) made by
    latentworks' own code: on an accelerator each one waits for the device."""
    calls: list[str] = []
    patched = {}
    for name in ("__int__", "__bool__", "item", "tolist"):
        real = getattr(torch.Tensor, name)

        def spy(self, *a, _real=real, _name=name, **k):
            caller = sys._getframe(1).f_code.co_filename
            if caller.startswith(LATENT_DIR):
                calls.append(_name)
            return _real(self, *a, **k)

        patched[name] = real
        setattr(torch.Tensor, name, spy)
    try:
        yield calls
    finally:
        for name, real in patched.items():
            setattr(torch.Tensor, name, real)


def test_latent_loop_reads_the_host_once_whatever_the_steps(llama):
    """k latent steps read one value back to the host (the context bound, before the loop), not one per
    step: the same count for 2 and 12 steps."""
    st = llama.prefill(**llama.encode(PROMPTS))
    counts = []
    for steps in (2, 12):
        with host_reads() as calls:
            llama.think(st, steps)
        counts.append(len(calls))
    assert counts[0] == counts[1] <= 1, counts


def test_decode_loop_reads_the_host_every_few_steps_on_an_accelerator(llama, monkeypatch):
    """With the accelerator setting (a stop check every `STOP_CHECK_EVERY` steps), decoding N tokens reads
    the host about N / 8 times, and gives exactly the tokens, lengths and texts of a check every step."""
    enc = llama.encode(PROMPTS)
    every_step = llama.generate(**enc, max_new_tokens=24, eos_token_id=-5)  # no eos: decode all 24
    monkeypatch.setattr(lm, "_stop_check_every", lambda device: lm.STOP_CHECK_EVERY)
    st = llama.prefill(**enc)
    with host_reads() as calls:
        sparse = llama.generate(state=st, max_new_tokens=24, eos_token_id=-5)
    assert len(calls) <= 24 // lm.STOP_CHECK_EVERY + 2, calls
    assert torch.equal(sparse.tokens, every_step.tokens) and torch.equal(sparse.lengths, every_step.lengths)
    assert sparse.texts == every_step.texts


def test_sparse_stop_checks_keep_early_finishing_rows_identical(llama, monkeypatch):
    """Rows that end at different steps: checking for the end every 8 steps (steps run after the last row
    ended only add pads, cut off) gives the tokens, lengths and texts of a check every step."""
    enc = llama.encode([*PROMPTS, "Sam counts 4 birds and", "Nine minus two is"])
    third = llama.generate(**enc, max_new_tokens=3).tokens[:, 2]
    for eos in (int(third[1]), sorted(set(third.tolist()))):  # row 1 ends at step 3; then every row by 3
        monkeypatch.setattr(lm, "_stop_check_every", lambda device: 1)
        dense = llama.generate(**enc, max_new_tokens=12, eos_token_id=eos)
        monkeypatch.setattr(lm, "_stop_check_every", lambda device: lm.STOP_CHECK_EVERY)
        sparse = llama.generate(**enc, max_new_tokens=12, eos_token_id=eos)
        assert torch.equal(sparse.tokens, dense.tokens) and torch.equal(sparse.lengths, dense.lengths)
        assert sparse.texts == dense.texts
    assert dense.tokens.shape[1] <= 3  # the last case ends before the first sparse check (step 8)


def test_context_is_still_checked_near_the_limit(llama, monkeypatch):
    """Bounding the context once per loop still raises `ContextOverflow` at the step that passes the limit,
    and lets the last step that fits run."""
    st = llama.prefill(**llama.encode(PROMPTS[:1]))
    n = int(st.next_position.max())
    monkeypatch.setattr(llama, "_max_positions", n + 3)
    llama.think(st, 3)  # ends exactly at the limit
    with pytest.raises(ContextOverflow):
        llama.think(st, 4)
    llama.generate(state=st, max_new_tokens=3, eos_token_id=-5)
    with pytest.raises(ContextOverflow):
        llama.generate(state=st, max_new_tokens=5, eos_token_id=-5)


def test_sampling_draws_on_the_scores_device_with_the_given_generator(llama, monkeypatch):
    """Sampling calls `torch.multinomial` on the probabilities where they are (no copy to another device),
    and draws exactly what `torch.multinomial` draws from the same softmax with the same seed."""
    scores = torch.randn(3, 50)
    seen = []
    real = torch.multinomial

    def spy(probs, *a, **k):
        seen.append(probs.device)
        return real(probs, *a, **k)

    monkeypatch.setattr(torch, "multinomial", spy)
    got = lm.LatentModel._pick(scores, True, 0.7, 0, 1.0, torch.Generator().manual_seed(5))
    ref = real((scores / 0.7).softmax(-1), 1, generator=torch.Generator().manual_seed(5)).squeeze(-1)
    assert torch.equal(got, ref) and seen == [scores.device]


def test_device_map_load_decodes_like_one_device(llama):
    """A model loaded with a `device_map` (here every module on the CPU, through accelerate's placement
    hooks) thinks and decodes exactly like the same model loaded on one device."""
    path = llama.model.name_or_path
    mapped = load_model(path, device_map={"": "cpu"}, attn_implementation="eager")
    for m in (llama, mapped):
        st = m.prefill(**m.encode(PROMPTS))
        th, st = m.think(st, 3)
        m.out = (th, m.generate(**m.encode(["So", "The answer is"]), state=st, max_new_tokens=6))
    assert torch.equal(llama.out[0], mapped.out[0])
    assert torch.equal(llama.out[1].tokens, mapped.out[1].tokens)
    del llama.out


def test_device_and_device_map_together_are_refused(llama):
    """`device` and `device_map` name two placements: refused before anything loads."""
    with pytest.raises(ValueError, match="not both"):
        load_model(llama.model.name_or_path, device="cpu", device_map="auto")


def test_tokens_follow_the_embedding_when_the_head_answers_elsewhere(llama, monkeypatch):
    """The picked tokens are moved to the embedding's device before they are stored and fed back (with
    `device_map` the head's logits can sit on another GPU): `.to(model.device)` is applied to them."""
    moved = []
    real_pick = lm.LatentModel._pick

    class Tracked(torch.Tensor):
        def to(self, *a, **k):
            moved.append(a[0] if a else k.get("device"))
            return torch.Tensor.to(self.as_subclass(torch.Tensor), *a, **k)

    monkeypatch.setattr(lm.LatentModel, "_pick", staticmethod(lambda *a: real_pick(*a).as_subclass(Tracked)))
    llama.generate(**llama.encode(PROMPTS[:1]), max_new_tokens=2, eos_token_id=-5)
    assert moved and all(torch.device(d) == llama.device for d in moved)
