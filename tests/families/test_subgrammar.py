"""Tests of the subgrammar family: exact KL decomposition, sampler frequencies, nltk log-probs, errors."""

from __future__ import annotations

import math
from collections import Counter

import numpy as np
import pytest

from families.demo_cli import load_results
from families.subgrammar import (
    PCFG,
    SubgrammarConfig,
    finite_pcfg,
    kl_decomposition,
    linear_cka,
    three_subgrammar_pcfg,
)
from families.subgrammar.grammar import EOS


def _bigram_logq(grammar: PCFG, seed: int = 0):
    """A model with known probabilities: a random bigram table q(next | previous token)."""
    vocab = ["<bos>", EOS, *grammar.terminals()]
    rng = np.random.default_rng(seed)
    logits = rng.normal(size=(len(vocab), len(vocab)))
    table = logits - np.log(np.exp(logits).sum(1, keepdims=True))
    ix = {t: i for i, t in enumerate(vocab)}

    def logq(tokens: list[str]) -> np.ndarray:
        seq = ["<bos>", *tokens, EOS]
        return np.array([table[ix[a], ix[b]] for a, b in zip(seq[:-1], seq[1:])])

    return logq


def test_kl_decomposition_is_exact_on_a_finite_grammar():
    """Summing over the whole finite language, KL(p||q) = KL_top + sum_i c_i KL_i with c_i the analytic
    expected invocation counts, for a bigram model q with known probabilities; each KL_i is >= 0."""
    g = finite_pcfg()
    lang = g.enumerate_language()
    probs = [math.exp(s.logp) for s in lang]
    assert abs(sum(probs) - 1) < 1e-12
    logq = _bigram_logq(g)
    lq = [logq(s.tokens) for s in lang]
    exact = sum(p * (s.logp - q.sum()) for p, s, q in zip(probs, lang, lq))
    d = kl_decomposition(lang, probs, lq, g)
    coef = g.decomposition_coefficients()
    assert abs(d["total"] - exact) < 1e-10
    assert abs(d["top"] + sum(coef[r] * d[f"KL_{r}"] for r in coef) - exact) < 1e-10
    for r in coef:
        assert abs(d[f"c_{r}"] - coef[r]) < 1e-12  # expected invocations = exact weighted counts
        assert d[f"KL_{r}"] > 0


def _pcfg_as_autoregressive_model(grammar: PCFG):
    """log q(token | prefix) of every token (plus EOS) of a finite PCFG, from prefix masses of its language:
    a genuine next-token model that knows nothing of segments or delimiters' roles."""
    prefix: dict[tuple[str, ...], float] = {}
    for s in grammar.enumerate_language():
        seq = (*s.tokens, EOS)
        for t in range(len(seq) + 1):
            prefix[seq[:t]] = prefix.get(seq[:t], 0.0) + math.exp(s.logp)

    def logq(tokens: list[str]) -> np.ndarray:
        seq = (*tokens, EOS)
        return np.array([math.log(prefix[seq[: t + 1]] / prefix[seq[:t]]) for t in range(len(seq))])

    return logq


def _string_kl(p: PCFG, q: PCFG) -> float:
    """KL(p || q) between two finite PCFGs over the same language, from whole-string probabilities."""
    q_of = {tuple(s.tokens): s.logp for s in q.enumerate_language()}
    return sum(math.exp(s.logp) * (s.logp - q_of[tuple(s.tokens)]) for s in p.enumerate_language())


def test_kl_decomposition_matches_standalone_subgrammar_kls():
    """The theorem with independent sides: q is the same grammar with the top-level choice and both
    subgrammars' rule probabilities changed, used only through its next-token probabilities. Then the
    segment terms equal KL(p_i || q_i) of the standalone subgrammars, the top term equals E[#S] times the
    KL of the top-level choice, and the total (from whole strings) equals KL_top + sum_i c_i KL_i with the
    analytic c_i."""
    p = finite_pcfg()
    rules = dict(p.rules)
    rules["S"] = [(("sA", "A", "eA"), 0.2), (("sB", "B", "eB"), 0.8)]
    rules["A"] = [(("N",), 0.4), (("+", "N", "N"), 0.6)]
    rules["B"] = [(("a", "c", "b"), 0.9), (("c",), 0.1)]
    q = PCFG(rules, p.start, p.sub_roots)
    lang = p.enumerate_language()
    d = kl_decomposition(lang, [math.exp(s.logp) for s in lang], [_pcfg_as_autoregressive_model(q)(s.tokens)
                         for s in lang], p)  # fmt: skip
    standalone = {r: _string_kl(p.subgrammar(r), q.subgrammar(r)) for r in p.sub_roots}
    top_choice = 0.5 * math.log(0.5 / 0.2) + 0.5 * math.log(0.5 / 0.8)
    coef = p.decomposition_coefficients()
    for r in p.sub_roots:
        assert standalone[r] > 0.05
        assert abs(d[f"KL_{r}"] - standalone[r]) < 1e-10
    assert abs(d["top"] - sum(coef.values()) * top_choice) < 1e-10  # E[#S] = c_A + c_B = 1.4
    total = _string_kl(p, q)
    assert abs(d["total"] - total) < 1e-10
    assert abs(sum(coef.values()) * top_choice + sum(coef[r] * standalone[r] for r in coef) - total) < 1e-10


def test_expected_invocations_from_the_mean_matrix():
    """c_i = E[#S] * pi_i for the repeating top level: 1/0.7 * (0.3, 0.3, 0.4)."""
    coef = three_subgrammar_pcfg().decomposition_coefficients()
    for r, pi in zip("ABC", (0.3, 0.3, 0.4)):
        assert abs(coef[r] - pi / 0.7) < 1e-12


def test_sampled_frequencies_match_pcfg_probabilities():
    """Frequencies of 8k sampled strings match the exact probabilities (|f - p| < 4 standard errors)."""
    g = finite_pcfg()
    lang = {tuple(s.tokens): math.exp(s.logp) for s in g.enumerate_language()}
    n = 8_000
    samples = g.sample_many(n, seed=3)
    counts = Counter(tuple(s.tokens) for s in samples)
    assert set(counts) <= set(lang)
    for toks, p in lang.items():
        assert abs(counts[toks] / n - p) < 4 * math.sqrt(p * (1 - p) / n) + 1e-4
    for s in samples[:50]:  # the sampler's log-probability is the string's exact log-probability
        assert abs(s.logp - math.log(lang[tuple(s.tokens)])) < 1e-12


def test_sampler_logprob_matches_nltk_inside_parser():
    """On the three-subgrammar grammar the sampler's log p equals nltk's sum over parses."""
    pytest.importorskip("nltk", reason="exact string probabilities use nltk's InsideChartParser")
    g = three_subgrammar_pcfg()
    for s in g.sample_many(5, seed=1, max_len=30):
        assert abs(s.logp - g.string_logprob_nltk(s.tokens)) < 1e-9
    assert g.string_logprob_nltk(["sA", "eA"]) == -math.inf  # not in the language


def test_linear_cka_identities():
    """CKA is 1 for a feature set and its rotation+scale, and ~0 for independent features."""
    rng = np.random.default_rng(0)
    x = rng.normal(size=(500, 4))
    q, _ = np.linalg.qr(rng.normal(size=(4, 4)))
    assert abs(linear_cka(x, 3 * x @ q) - 1) < 1e-10
    assert linear_cka(x, rng.normal(size=(500, 4))) < 0.05


def test_bad_inputs_raise_clear_errors():
    """Malformed grammars, configs and decomposition inputs raise ValueError naming the problem."""
    with pytest.raises(ValueError, match="sum to"):
        PCFG({"S": [(("a",), 0.5)]}, "S", ())
    with pytest.raises(ValueError, match="not consistent"):
        PCFG({"S": [(("S", "S"), 0.6), (("a",), 0.4)]}, "S", ())
    with pytest.raises(ValueError, match="divisible"):
        SubgrammarConfig(hidden_size=10, num_attention_heads=3)
    g = finite_pcfg()
    lang = g.enumerate_language()
    with pytest.raises(ValueError, match="equal length"):
        kl_decomposition(lang, [1.0], [np.zeros(1)], g)
    with pytest.raises(ValueError, match="plus EOS"):
        kl_decomposition(lang[:1], [1.0], [np.zeros(1)], g)
    with pytest.raises(ValueError, match="finite"):
        three_subgrammar_pcfg().enumerate_language()


def test_tiny_gpt_training_lowers_every_subgrammar_kl():
    """A few dozen steps of a tiny GPT-2 lower the total and every per-subgrammar KL (training smoke)."""
    pytest.importorskip("transformers", reason="the LM is a transformers GPT-2")
    from families.subgrammar import train_and_track

    cfg = SubgrammarConfig(hidden_size=8, num_hidden_layers=1, num_attention_heads=1, train_steps=30,
                           eval_every=30, num_train=200, num_test=60, learning_rate=1e-2)  # fmt: skip
    res = train_and_track(three_subgrammar_pcfg(), cfg, seed=0)
    for k in ("total", "KL_A", "KL_B", "KL_C"):
        assert res.curves[k][-1] < res.curves[k][0]


def test_training_is_deterministic_per_seed():
    """Same seed, same curves and alignment to the last digit (the demo's tables are reproducible);
    another seed gives other numbers (the seed is used)."""
    pytest.importorskip("transformers", reason="the LM is a transformers GPT-2")
    from families.subgrammar import train_and_track

    cfg = SubgrammarConfig(hidden_size=8, num_hidden_layers=1, num_attention_heads=1, train_steps=12,
                           eval_every=6, num_train=100, num_test=30, pretrain_steps=4)  # fmt: skip
    g = three_subgrammar_pcfg()
    a, b, c = (train_and_track(g, cfg, seed=s) for s in (0, 0, 1))
    assert a.curves == b.curves and a.cka == b.cka
    assert a.curves["total"] != c.curves["total"]


def test_demo_quick_smoke(tmp_path):
    """The quick demo runs end to end and writes its results JSON."""
    from families.subgrammar.demo import main

    assert main(["--quick", "--out", str(tmp_path)]) == 0
    res = load_results(tmp_path)
    assert res["nltk_max_abs_logp_error"] < 1e-9
    assert 0.1 < res["runs"]["1L_d8_scratch"][0]["curves"]["total"][-1] < 60  # nats per string, trained
