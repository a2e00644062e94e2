"""Tests of the MemExplainer family: exact conservation, linearised-GRU backtracking vs autograd,
KL-optimal selection (exhaustive vs HiGHS MILP), baselines, bad input, demo smoke."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from families.memexplainer import (
    MemExplainerConfig,
    MemTGN,
    bernoulli_kl_logits,
    explain_stream,
    linearise_gru,
    make_streams,
    select_events,
)
from families.memexplainer.data import QUERY_NODE, EventStreams
from families.memexplainer.explain import _closest_subset_milp

# tiny sizes keep every test in milliseconds
TINY = dict(
    memory_dim=6,
    time_dim=3,
    raw_msg_dim=3,
    hidden_size=4,
    num_attention_heads=2,
    decoder_hidden_size=5,
    num_neighbors=3,
    nodes_per_stream=5,
    stream_length=10,
)


def _random_model(seed: int, scale: float = 2.0) -> MemTGN:
    """A random float64 TGN; `scale` enlarges the weights so gates and tanh leave their linear range."""
    torch.manual_seed(seed)
    model = MemTGN(MemExplainerConfig(**TINY)).double().eval()
    with torch.no_grad():
        for p in model.parameters():
            p.mul_(scale)
    return model


@pytest.mark.parametrize("max_depth", [None, 0, 2])
def test_contributions_plus_non_event_terms_sum_to_the_model_logit(max_depth: int | None) -> None:
    """Conservation: events + bias + initial + truncated memory == logit of the torch_geometric TGN."""
    for seed in range(2):
        model = _random_model(seed)
        streams = make_streams(4, model.cfg, seed=seed)
        with torch.no_grad():
            logits = model(streams)
        for i in range(len(streams)):
            e = explain_stream(model, streams, i, max_depth)
            assert e.logit == pytest.approx(logits[i].item(), abs=1e-10)  # replay == TGNMemory forward
            assert abs(e.total - logits[i].item()) < 1e-6
            assert abs(e.total - e.logit) < 1e-10  # in practice ~1e-15
            if max_depth == 0:  # topology tree only: no event outside the query node's window scores
                window = e.extra["window_steps"]
                outside = [s for s in range(streams.stream_length) if s not in window]
                assert torch.all(e.events[outside] == 0) and torch.equal(e.events, e.topology)
            if max_depth is None:
                assert e.truncated_memory == 0.0


def test_initial_memory_term_is_zero_and_deep_enough_depth_equals_full_tree() -> None:
    """TGNMemory starts at 0 so that term vanishes; any depth beyond the longest chain is the full tree."""
    model = _random_model(0)
    streams = make_streams(3, model.cfg, seed=5)
    for i in range(3):
        full, deep = explain_stream(model, streams, i, None), explain_stream(model, streams, i, 50)
        assert full.initial_memory == 0.0
        torch.testing.assert_close(full.events, deep.events, rtol=0, atol=1e-12)


def test_linearised_gru_is_exact_at_the_input() -> None:
    """h' = M_self h + M_other s_other + c * W_feat f + bias reproduces torch's GRUCell output."""
    d, other, f = 6, 6, 5
    gru = torch.nn.GRUCell(d + other + f, d).double()
    with torch.no_grad():
        for p in gru.parameters():
            p.mul_(3.0)  # saturating gates and tanh
    h, s_o, feats = torch.randn(d).double(), torch.randn(other).double(), torch.randn(f).double()
    msg = torch.cat([h, s_o, feats])
    m_self, m_other, w_f, c, bias, out = linearise_gru(gru, msg, h, d)
    ref = gru(msg[None], h[None])[0].detach()
    torch.testing.assert_close(out, ref, rtol=0, atol=1e-12)
    torch.testing.assert_close(m_self @ h + m_other @ s_o + c * (w_f @ feats) + bias, ref, rtol=0, atol=1e-12)


def _autograd_linearised_contributions(model: MemTGN, streams: EventStreams, i: int) -> tuple:
    """Independent check: the TGN with every non-linearity frozen (gates, tanh gain, attention, ReLU
    mask detached) is linear in the event features; gradient x input per event is then its exact share.
    """
    cfg, d = model.cfg, model.cfg.memory_dim
    gru, conv, tenc = model.memory.gru, model.conv, model.memory.time_enc
    src, dst = streams.src[i].tolist(), streams.dst[i].tolist()
    x = streams.msg[i].double().clone().requires_grad_(True)
    leaves: list[tuple[int, torch.Tensor]] = []

    def phi(step: int, dt: float) -> torch.Tensor:
        enc = tenc(torch.tensor([float(dt)], dtype=torch.float64))[0]  # TimeEncoder: cos(w dt + b)
        leaf = enc.detach().requires_grad_(True)
        leaves.append((step, leaf))
        return leaf

    mem = [torch.zeros(d, dtype=torch.float64) for _ in range(streams.num_nodes)]
    last = [0] * streams.num_nodes
    for s in range(len(src)):
        new = {}
        for a, b in ((src[s], dst[s]), (dst[s], src[s])):
            m = torch.cat([mem[a], mem[b], x[s], phi(s, s + 1 - last[a])])
            gi_r, gi_z, gi_n = F.linear(m, gru.weight_ih, gru.bias_ih).chunk(3)
            gh_r, gh_z, gh_n = F.linear(mem[a], gru.weight_hh, gru.bias_hh).chunk(3)
            r, z = torch.sigmoid(gi_r + gh_r).detach(), torch.sigmoid(gi_z + gh_z).detach()
            pre = gi_n + r * gh_n
            new[a] = (1 - z) * (torch.tanh(pre) / pre).detach() * pre + z * mem[a]
        for a, v in new.items():
            mem[a], last[a] = v, s + 1
    window = [s for s in range(len(src)) if QUERY_NODE in (src[s], dst[s])][-cfg.num_neighbors :]
    heads, ch = cfg.num_attention_heads, cfg.hidden_size
    s_q = mem[QUERY_NODE]
    h = F.linear(s_q, conv.lin_skip.weight, conv.lin_skip.bias)
    if window:
        nb = torch.stack([mem[dst[s] if src[s] == QUERY_NODE else src[s]] for s in window])
        ea = torch.stack([torch.cat([x[s], phi(s, len(src) - s)]) for s in window])
        q = F.linear(s_q, conv.lin_query.weight, conv.lin_query.bias).view(heads, ch)
        e = F.linear(ea, conv.lin_edge.weight).view(-1, heads, ch)
        k = F.linear(nb, conv.lin_key.weight, conv.lin_key.bias).view(-1, heads, ch) + e
        v = F.linear(nb, conv.lin_value.weight, conv.lin_value.bias).view(-1, heads, ch) + e
        alpha = torch.softmax((k * q).sum(-1) / math.sqrt(ch), 0).detach()
        h = h + (alpha[:, :, None] * v).sum(0).reshape(-1)
    a1 = model.lin1(h)
    logit = model.lin2((a1 > 0).double().detach() * a1)[0]
    inputs = [x] + [leaf for _, leaf in leaves]
    # events that never reach the query node leave some leaves unused: their share is 0
    grads = torch.autograd.grad(logit, inputs, allow_unused=True, materialize_grads=True)
    contrib = (grads[0] * x).sum(-1).detach()
    for (s, leaf), g in zip(leaves, grads[1:], strict=True):
        contrib[s] += (g * leaf).sum().detach()
    return logit.item(), contrib


def test_backtracking_matches_autograd_on_the_linearised_model() -> None:
    """The memory backtracking + topology trees equal gradient x input of the frozen (linear) TGN."""
    for seed in range(2):
        model = _random_model(seed)
        streams = make_streams(4, model.cfg, seed=10 + seed)
        for i in range(len(streams)):
            e = explain_stream(model, streams, i, None)
            logit, contrib = _autograd_linearised_contributions(model, streams, i)
            assert logit == pytest.approx(e.logit, abs=1e-10)  # freezing changes no forward value
            torch.testing.assert_close(e.events, contrib, rtol=0, atol=1e-10)


def test_kl_objective_matches_bernoulli_definition() -> None:
    """The stable softplus form equals p log(p/q) + (1-p) log((1-p)/(1-q))."""
    z, s = np.array([-3.0, 0.2, 4.0]), np.array([1.0, -2.0, 4.5])
    p, q = 1 / (1 + np.exp(-z)), 1 / (1 + np.exp(-s))
    ref = p * np.log(p / q) + (1 - p) * np.log((1 - p) / (1 - q))
    np.testing.assert_allclose(bernoulli_kl_logits(z, s), ref, atol=1e-12)
    assert bernoulli_kl_logits(2.0, 2.0) == 0.0


def test_kl_selection_beats_naive_topk_on_a_hand_case() -> None:
    """z = 3, b = 0: the single event with c = 3 is KL-optimal; naive top-1 takes c = 5 and overshoots."""
    c = np.array([5.0, 3.0, -1.0, 0.5])
    assert select_events(c, 3.0, 0.0, 1, "kl").tolist() == [1]
    assert select_events(c, 3.0, 0.0, 1, "topk").tolist() == [0]
    assert select_events(c, -2.0, 0.0, 1, "topk").tolist() == [2]  # towards the predicted class


def test_kl_selection_is_the_brute_force_optimum_and_milp_agrees() -> None:
    """Exhaustive search and the two HiGHS MILPs (closest sum below / above z - b) reach the optimum."""
    rng = np.random.default_rng(0)
    for trial in range(4):
        n, k = 10, 1 + trial % 4
        c, z, b = rng.normal(size=n) * 2, float(rng.normal() * 3), float(rng.normal())
        best = min(bernoulli_kl_logits(z, b + c[list(s)].sum()) for s in itertools.combinations(range(n), k))
        exact = select_events(c, z, b, k, "kl")
        milp = select_events(c, z, b, k, "kl", exhaustive_limit=1)  # forces the MILP path
        assert len(exact) == len(milp) == k
        assert bernoulli_kl_logits(z, b + c[exact].sum()) == pytest.approx(best, abs=1e-12)
        assert bernoulli_kl_logits(z, b + c[milp].sum()) == pytest.approx(best, abs=1e-6)
        topk = select_events(c, z, b, k, "topk")
        assert bernoulli_kl_logits(z, b + c[exact].sum()) <= bernoulli_kl_logits(z, b + c[topk].sum()) + 1e-12
    assert _closest_subset_milp(np.array([1.0, 2.0]), 1, -5.0, below=True) is None  # infeasible side


def test_relaxed_selection_is_a_valid_k_subset_never_better_than_the_exact_optimum() -> None:
    """The reference code's convex relaxation returns k distinct events and its KL is >= the exact optimum.

    (Its optimum is a whole face {x : c.x = z - b}, so which k events come out is up to the solver.)"""
    pytest.importorskip("cvxpy", reason="the relaxed selection is solved with cvxpy")
    rng = np.random.default_rng(3)
    for trial in range(4):
        n, k = 9, 1 + trial % 3
        c, z, b = rng.normal(size=n) * 2, float(rng.normal() * 3), float(rng.normal())
        relaxed = select_events(c, z, b, k, "relaxed")
        exact = select_events(c, z, b, k, "kl")
        assert len(set(relaxed.tolist())) == k
        assert (
            bernoulli_kl_logits(z, b + c[relaxed].sum()) >= bernoulli_kl_logits(z, b + c[exact].sum()) - 1e-12
        )


def test_zero_contribution_events_only_pad_the_selection() -> None:
    """Events outside the explanation (c == 0) are used only when fewer than k events score."""
    c = np.array([0.0, 2.0, 0.0, -1.0])
    assert set(select_events(c, 1.0, 0.0, 2, "kl").tolist()) == {1, 3}
    assert set(select_events(c, 1.0, 0.0, 3, "kl").tolist()) >= {1, 3}


def test_streams_plant_the_trigger_outside_the_neighbour_window() -> None:
    """Positives have one flagged query-node event with > num_neighbors later query-node events."""
    cfg = MemExplainerConfig(**TINY)
    s = make_streams(40, cfg, seed=3)
    assert s.label.mean().item() == 0.5
    for i in range(len(s)):
        own = ((s.src[i] == QUERY_NODE) | (s.dst[i] == QUERY_NODE)).nonzero().flatten()
        flagged_own = own[s.msg[i, own, -1] == 1]
        if s.label[i] == 1:
            assert flagged_own.tolist() == [s.trigger_step[i].item()]
            assert (own > s.trigger_step[i]).sum() > cfg.num_neighbors
        else:
            assert len(flagged_own) == 0 and s.trigger_step[i] == -1


def test_dormancy_streams_carry_the_label_only_in_event_timing() -> None:
    """Dormancy task: positives have one silence of `dormancy_gap` steps before the trigger; negatives
    have query-node gaps <= 3; the trigger is outside the window; flags are label-free."""
    cfg = MemExplainerConfig(task="dormancy", decoy_prob=0.3)
    s = make_streams(200, cfg, seed=4)
    flag_rate = [s.msg[s.label == y][..., -1].mean().item() for y in (0, 1)]
    assert abs(flag_rate[0] - flag_rate[1]) < 0.03  # the flag feature says nothing about the label
    for i in range(len(s)):
        own = ((s.src[i] == QUERY_NODE) | (s.dst[i] == QUERY_NODE)).nonzero().flatten()
        gaps = (own[1:] - own[:-1]).tolist()
        if s.label[i] == 1:
            trig = s.trigger_step[i].item()
            j = own.tolist().index(trig)
            assert gaps[j - 1] == cfg.dormancy_gap and max(g for k, g in enumerate(gaps) if k != j - 1) <= 2
            assert (own > trig).sum() > cfg.num_neighbors
        else:
            assert max(gaps) <= 3 and s.trigger_step[i] == -1


def test_attention_baseline_and_ig_completeness() -> None:
    """Attention scores live only on window events and sum to 1; captum IG is (nearly) complete."""
    pytest.importorskip("captum", reason="integrated gradients baseline")
    from families.memexplainer.baselines import attention_scores, integrated_gradients

    model = _random_model(1, scale=1.0)
    streams = make_streams(2, model.cfg, seed=2)
    att = attention_scores(model, streams)
    for i in range(2):
        window = explain_stream(model, streams, i).extra["window_steps"]
        assert att[i].nonzero().flatten().tolist() == window
        assert att[i].sum().item() == pytest.approx(1.0)
    ig = integrated_gradients(model, streams, n_steps=32)
    with torch.no_grad():
        gap = model(streams) - model.run(streams, msg=torch.zeros_like(streams.msg)).logit
    torch.testing.assert_close(ig.sum(1), gap, rtol=0, atol=2e-2)


@pytest.mark.parametrize(
    "kwargs",
    [
        dict(memory_dim=0),
        dict(raw_msg_dim=1),
        dict(stream_length=4),
        dict(decoy_prob=1.5),
        dict(max_depth=-1),
        dict(selection="greedy"),
        dict(lr=0.0),
        dict(task="xor"),
        dict(dormancy_gap=2),
    ],
)
def test_config_rejects_bad_values(kwargs: dict) -> None:
    """Invalid hyper-parameters raise ValueError naming the field."""
    with pytest.raises(ValueError, match=next(iter(kwargs))):
        MemExplainerConfig(**kwargs)


def test_bad_inputs_are_refused() -> None:
    """NaN features, self-loops, wrong shapes, bad indices and bad selection arguments raise ValueError."""
    model = _random_model(0)
    s = make_streams(2, model.cfg, seed=0)
    bad = s.subset(slice(0, 2))
    bad.msg = bad.msg.clone()
    bad.msg[0, 0, 0] = float("nan")
    with pytest.raises(ValueError, match="NaN"):
        model(bad)
    loop = s.subset(slice(0, 2))
    loop.dst = loop.src.clone()
    with pytest.raises(ValueError, match="self-loop"):
        model(loop)
    with pytest.raises(ValueError, match="keep"):
        model(s, torch.ones(2, 3, dtype=torch.bool))
    with pytest.raises(ValueError, match="index"):
        explain_stream(model, s, 5)
    with pytest.raises(ValueError, match="k"):
        select_events(np.ones(3), 1.0, 0.0, 4)
    with pytest.raises(ValueError, match="finite"):
        select_events(np.array([np.nan, 1.0]), 1.0, 0.0, 1)
    with pytest.raises(ValueError, match="num_streams"):
        make_streams(0, model.cfg, seed=0)


def test_demo_quick_smoke(tmp_path, capsys) -> None:
    """The --quick demo runs end to end and writes its JSON."""
    pytest.importorskip("captum", reason="the demo compares against captum IG")
    from families.memexplainer.demo import main

    # 2 Adam steps and 4 streams: seconds, not a meaningful result
    argv = ["--quick", "--seeds", "1", "--train-steps", "2", "--explain", "4", "--out", str(tmp_path)]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "MemExplainer (KL)" in out and "Recall@k" in out and "MemExplainer (relaxed)" in out
    from families.demo_cli import load_results

    assert load_results(tmp_path)["runs"][0]["conservation_max_abs"] < 1e-8  # float64 conservation
