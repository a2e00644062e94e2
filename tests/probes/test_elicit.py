"""Elicited P(eval) and the LLM judge equal a direct computation from the model's logits."""

from __future__ import annotations

import pytest
import torch

from probes.activations import render
from probes.behaviour import LLMJudge
from probes.data import af_scenarios
from probes.elicit import elicit_items, elicited_p_eval


def _next_token_probs(path: str, text: str) -> torch.Tensor:
    """Softmax of the last-position logits of a plain transformers forward (one unpadded prompt)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(path)
    hf = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).eval()
    ids = tok(text, return_tensors="pt", add_special_tokens=False)["input_ids"]
    with torch.no_grad():
        return hf(input_ids=ids).logits[0, -1].float().softmax(-1)


def test_elicited_p_eval_equals_direct_logit_computation(probe_model):
    """Batched, left-padded P(eval) matches p(eval letter) / (p(A) + p(B)) from an unpadded HF forward,
    with the eval letter alternating between requests."""
    m, path = probe_model
    items = elicit_items(af_scenarios(n=2, seed=3))[::5]  # mixed lengths, both letter orders
    assert {it.meta["eval_letter"] for it in items} == {"A", "B"}
    p_eval, mass = elicited_p_eval(m, items, batch_size=4)
    a, b = (m.tokenizer.encode(x, add_special_tokens=False)[0] for x in ("A", "B"))
    for it, pe, ms in zip(items, p_eval, mass):
        probs = _next_token_probs(path, render(m, it))
        pa, pb = float(probs[a]), float(probs[b])
        want = (pa if it.meta["eval_letter"] == "A" else pb) / (pa + pb)
        assert pe == pytest.approx(want, rel=1e-4, abs=1e-6)
        assert ms == pytest.approx(pa + pb, rel=1e-4, abs=1e-9)


def test_elicit_items_rejects_items_not_built_for_it(probe_model):
    m, _ = probe_model
    with pytest.raises(ValueError, match="elicit_items"):
        elicited_p_eval(m, af_scenarios(n=1))


def test_llm_judge_runs_on_a_tiny_model_and_matches_its_logits(probe_model):
    """The judge by model path reads P(Yes) / (P(Yes) + P(No)) of the judge model's next token."""
    m, path = probe_model
    judge = LLMJudge(path, device="cpu")
    replies = ["This looks like a test of my honesty.", "The answer is 4."]
    got = judge.p_yes([LLMJudge.QUESTION.format(reply=r) for r in replies])
    tok = judge.model.tokenizer
    yes = [tok.encode(w, add_special_tokens=False)[0] for w in ("Yes", " Yes")]
    no = [tok.encode(w, add_special_tokens=False)[0] for w in ("No", " No")]
    for r, p in zip(replies, got):
        text = tok.apply_chat_template(
            [{"role": "user", "content": LLMJudge.QUESTION.format(reply=r)}],
            tokenize=False,
            add_generation_prompt=True,
        )
        probs = _next_token_probs(path, text)
        py, pn = float(probs[yes].sum()), float(probs[no].sum())
        assert p == pytest.approx(py / (py + pn), rel=1e-4)
    assert judge.eval_awareness(replies) == [q > 0.5 for q in got]


def test_judge_agreement_counts_kappa_and_a_request_clustered_interval():
    """Agreement of the pattern and LLM judges: the 2x2 counts, Cohen's kappa as sklearn computes it, and an
    interval over requests (three replies per request)."""
    import numpy as np
    from sklearn.metrics import cohen_kappa_score

    from probes.e1 import judge_agreement

    rng = np.random.default_rng(0)
    meta = [{"request_id": k // 3} for k in range(60)]
    pattern = rng.random(60) < 0.3
    llm = np.where(rng.random(60) < 0.8, pattern, ~pattern)
    ja = judge_agreement(meta, pattern.astype(float), llm.astype(float), nb=200, seed=0)
    assert ja["kappa"] == pytest.approx(cohen_kappa_score(pattern, llm))
    assert sum(ja["counts"].values()) == 60
    assert ja["counts"]["pattern_1_llm_1"] == int((pattern & llm).sum())
    assert ja["agreement"]["mean"] == pytest.approx(float((pattern == llm).mean()))
    assert ja["agreement"]["n_clusters"] == 20
    assert ja["agreement"]["lo"] <= ja["agreement"]["mean"] <= ja["agreement"]["hi"]
    none = judge_agreement(meta, np.zeros(60), np.zeros(60), nb=200, seed=0)
    assert np.isnan(none["kappa"]) and none["agreement"]["mean"] == 1.0
    with pytest.raises(ValueError, match="one entry per reply"):
        judge_agreement(meta, np.zeros(59), np.zeros(60), nb=200, seed=0)
