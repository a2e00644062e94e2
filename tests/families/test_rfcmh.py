"""Tests of the RFCMH family: possibility theory identities, losses, codes, the mAP metric, demo smoke."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from families.rfcmh import (
    RFCMH,
    RFCMHConfig,
    admissibility,
    mean_average_precision,
    necessity_measure,
    normalize_possibility,
    possibility_measure,
    reliability_weights,
    train_rfcmh,
)
from families.rfcmh.data import symmetric_label_noise
from families.rfcmh.model import intra_loss, q_surrogate


def _all_events(K: int) -> list[torch.Tensor]:
    return [torch.tensor([(m >> k) & 1 for k in range(K)], dtype=torch.bool) for m in range(2**K)]


def test_necessity_is_dual_and_below_possibility_for_every_event() -> None:
    """N(A) = 1 - Pi(not A) and N(A) <= Pi(A) on all 2^K events of normalised distributions."""
    pi = normalize_possibility(torch.rand(20, 5, dtype=torch.float64))
    for A in _all_events(5):
        N, Pi = necessity_measure(pi, A), possibility_measure(pi, A)
        torch.testing.assert_close(N, 1 - possibility_measure(pi, ~A))
        assert (N <= Pi + 1e-12).all()


def test_unnormalised_possibility_can_break_n_below_pi() -> None:
    """Why we normalise: with sup pi < 1 the inequality N <= Pi fails (so the test above can fail)."""
    pi = torch.full((1, 3), 0.1)
    A = torch.tensor([True, False, False])
    assert necessity_measure(pi, A).item() > possibility_measure(pi, A).item()


def test_admissibility_necessity_matches_measures() -> None:
    """With kappa = 1 the label necessity is N({t}); the non-label one is N(not t) = 1 - p_t."""
    p = torch.rand(8, 6, dtype=torch.float64)
    y = torch.randint(0, 6, (8,))
    n, a = admissibility(p, y, kappa=1)
    onehot = torch.nn.functional.one_hot(y, 6).bool()
    torch.testing.assert_close(n[onehot], necessity_measure(p, onehot))
    nonlabel = n.masked_select(~onehot).view(8, 5)
    torch.testing.assert_close(nonlabel, necessity_measure(p, ~onehot)[:, None].expand(8, 5))
    torch.testing.assert_close(a[onehot], (p[onehot] + n[onehot]) / 2)


def test_admissibility_topk_and_ablation() -> None:
    """Top-kappa necessity averages the kappa largest competitors; kappa=0 or no necessity returns p."""
    p = torch.tensor([[0.9, 0.8, 0.2, 0.1]])
    n, a = admissibility(p, torch.tensor([0]), kappa=2)
    assert n[0, 0].item() == pytest.approx(1 - 0.5)
    assert a[0, 0].item() == pytest.approx((0.9 + 2 * 0.5) / 3)
    assert torch.equal(admissibility(p, torch.tensor([0]), kappa=2, use_necessity=False)[1], p)


def test_reliability_weight_ranks_consistent_label_above_contradicted() -> None:
    """w_i is high when the labelled class dominates the admissibility, low when another class does."""
    a = torch.tensor([[0.9, 0.1, 0.1], [0.1, 0.9, 0.1]])
    w = reliability_weights(a, a, torch.tensor([0, 0]), delta=0.05, tau=0.7)
    assert w[0] > 0.5 > w[1]


def test_q_surrogate_gradient_grows_slower_than_log_loss() -> None:
    """Appendix A.1: |d l_q/dp| < 1/p for small p, and q = 1 gives a constant gradient."""
    p = torch.tensor([1e-4, 1e-2], requires_grad=True)
    q_surrogate(p, 0.01).sum().backward()
    assert (p.grad.abs() < 1 / p.detach()).all()
    p1 = torch.tensor([1e-3, 0.5], requires_grad=True)
    q_surrogate(p1, 1.0).sum().backward()
    torch.testing.assert_close(p1.grad, torch.tensor([-1.0, -1.0]))


def test_intra_loss_prefers_aligned_pairs() -> None:
    """The intra-instance contrast is lower when matched pairs are the most similar."""
    aligned = torch.eye(6)
    shuffled = torch.roll(torch.eye(6), 1, dims=1)
    assert intra_loss(aligned, 0.7, 0.01) < intra_loss(shuffled, 0.7, 0.01)


def test_codes_are_plus_minus_one_after_training() -> None:
    """Inference codes lie in {-1, +1} (also for zero pre-activations), and training changes weights."""
    cfg = RFCMHConfig(num_bits=8, num_classes=3, hidden_size=16, epochs=2, warmup_epochs=1, batch_size=8)
    x1, x2, y = torch.randn(24, 5), torch.randn(24, 4), torch.randint(0, 3, (24,))
    before = RFCMH(cfg, (5, 4)).state_dict()
    model = train_rfcmh(cfg, x1, x2, y)
    assert any(not torch.equal(before[k], v) for k, v in model.state_dict().items())
    for m, x in ((0, x1), (1, x2)):
        assert set(model.encode(x, m).unique().tolist()) == {-1.0, 1.0}
    assert set(model.encode(torch.zeros(2, 5), 0).unique().tolist()) <= {-1.0, 1.0}


def _map_brute_force(qc, dc, ql, dl) -> float:
    aps = []
    for q in range(len(qc)):
        dist = [int(np.sum(qc[q] != dc[j])) for j in range(len(dc))]
        ranked = sorted(range(len(dc)), key=lambda j: (dist[j], j))
        hits, precs = 0, []
        for rank, j in enumerate(ranked, start=1):
            if ql[q] == dl[j]:
                hits += 1
                precs.append(hits / rank)
        if hits:
            aps.append(sum(precs) / hits)
    return float(np.mean(aps))


def test_map_equals_brute_force() -> None:
    """Vectorised mAP@all equals a loop over ranked lists, with many Hamming ties and an unmatched query."""
    rng = np.random.default_rng(0)
    qc, dc = rng.choice([-1.0, 1.0], (7, 4)), rng.choice([-1.0, 1.0], (30, 4))
    ql, dl = rng.integers(0, 3, 7), rng.integers(0, 3, 30)
    ql[0] = 9  # no relevant item: skipped by both
    assert mean_average_precision(qc, dc, ql, dl) == pytest.approx(
        _map_brute_force(qc, dc, ql, dl), abs=1e-12
    )


def test_map_perfect_and_errors() -> None:
    """Identical codes per class give mAP 1; mismatched bit counts raise."""
    codes = np.repeat(np.array([[1.0, 1.0], [-1.0, -1.0]]), 3, axis=0)
    labels = np.repeat([0, 1], 3)
    assert mean_average_precision(codes, codes, labels, labels) == pytest.approx(1.0)
    with pytest.raises(ValueError, match="same L"):
        mean_average_precision(codes, codes[:, :1], labels, labels)


def test_symmetric_noise_flips_exact_fraction() -> None:
    """Each chosen label changes to a different class; the rest stay."""
    y = np.repeat(np.arange(10), 20)
    noisy = symmetric_label_noise(y, 0.4, 10, seed=0)
    assert (noisy != y).sum() == 80


@pytest.mark.parametrize(
    "kwargs",
    [dict(num_bits=0), dict(q=0.0), dict(warmup_epochs=99), dict(nonlabel_necessity="x"), dict(tau=-1)],
)
def test_config_rejects_bad_values(kwargs: dict) -> None:
    """Invalid hyper-parameters raise ValueError naming the field."""
    with pytest.raises(ValueError, match=next(iter(kwargs))):
        RFCMHConfig(**kwargs)


def test_training_rejects_bad_input() -> None:
    """NaNs, length mismatch and out-of-range labels are refused with a clear message."""
    cfg = RFCMHConfig(num_classes=3, epochs=1, warmup_epochs=0)
    x, y = torch.randn(10, 4), torch.randint(0, 3, (10,))
    with pytest.raises(ValueError, match="NaN"):
        train_rfcmh(cfg, x.clone().fill_(float("nan")), x, y)
    with pytest.raises(ValueError, match="same length"):
        train_rfcmh(cfg, x, x[:5], y)
    with pytest.raises(ValueError, match="num_classes"):
        train_rfcmh(cfg, x, x, y + 5)
    with pytest.raises(ValueError, match="rate"):
        symmetric_label_noise(np.arange(3), 1.5, 3, 0)


def test_demo_quick_smoke(tmp_path, capsys) -> None:
    """The --quick demo runs end to end and writes its JSON."""
    from families.rfcmh.demo import main

    # one seed, one epoch, two methods: keeps the smoke run to a few seconds
    argv = ["--quick", "--seeds", "1", "--epochs", "1", "--methods", "RFCMH,CE", "--out", str(tmp_path)]
    assert main(argv) == 0
    assert "RFCMH" in capsys.readouterr().out
    from families.demo_cli import load_results

    runs = {r["method"]: r["runs"][0] for r in load_results(tmp_path)["rows"]}
    assert all(0.0 <= runs[m][k] <= 1.0 for m in ("RFCMH", "CE") for k in ("i2t", "t2i"))


def test_high_noise_gap_rfcmh_and_rshnl_beat_cross_entropy() -> None:
    """At 80% symmetric noise RFCMH keeps a clear mAP lead over plain CE (both directions), and the
    noise-robust RSHNL baseline also beats CE: the robustness gap the paper's tables report."""
    from families.rfcmh.data import digits_two_view
    from families.rfcmh.demo import run_method

    torch.set_num_threads(1)
    d = digits_two_view(0.8, 0, n_train=400)
    cfg = RFCMHConfig(num_bits=32, epochs=10, seed=0, warmup_epochs=3)
    res = {m: run_method(m, cfg, d) for m in ("RFCMH", "RSHNL", "CE")}
    for direction in ("i2t", "t2i"):
        assert res["RFCMH"][direction] - res["CE"][direction] > 0.1, res
        assert res["RSHNL"][direction] - res["CE"][direction] > 0.05, res
