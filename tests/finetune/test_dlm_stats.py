"""DLM statistics: the vectorised stratified bootstrap reproduces rliable's estimates and intervals."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("rliable", reason="DLM statistics need the `dlm` extra (rliable)")

from finetune.dlm.stats import (  # noqa: E402
    _rliable,
    iqm_interval,
    pairwise_improvement,
    probability_of_improvement,
    stratified_resamples,
    verdict,
    wilson_interval,
)


@pytest.fixture(scope="module")
def scores():
    rng = np.random.default_rng(3)
    x = np.round(rng.uniform(0, 1, (3, 6)), 1)  # rounded: ties occur, as with LBF's returns
    y = np.round(np.clip(x + rng.normal(-0.2, 0.3, x.shape), 0, 1), 1)
    return x, y


def test_resamples_stay_inside_their_start_state():
    scores = np.arange(12.0).reshape(3, 4)  # every value names its (run, start state)
    boot = stratified_resamples(scores, 50, np.random.default_rng(0))
    assert boot.shape == (50, 3, 4)
    assert np.all(boot % 4 == np.arange(4))  # column j only ever holds values of column j
    assert len(np.unique(boot[:, :, 0])) == 3  # ... and draws every run of it


def test_pairwise_improvement_equals_rliable_metric(scores):
    _, metrics = _rliable()
    x, y = scores
    assert pairwise_improvement(x, y) == pytest.approx(metrics.probability_of_improvement(x, y))
    stack_x = stratified_resamples(x, 5, np.random.default_rng(1))
    stack_y = stratified_resamples(y, 5, np.random.default_rng(2))
    want = [metrics.probability_of_improvement(a, b) for a, b in zip(stack_x, stack_y)]
    assert pairwise_improvement(stack_x, stack_y) == pytest.approx(want)


def test_intervals_match_rliable_stratified_bootstrap(scores):
    library, metrics = _rliable()
    x, y = scores
    reps = 400
    np.random.seed(0)
    _, ci = library.get_interval_estimates(
        {"m": x}, lambda s: np.array([metrics.aggregate_iqm(s)]), reps=reps
    )
    point, lo, hi = iqm_interval(x, reps)
    assert point == pytest.approx(metrics.aggregate_iqm(x))
    assert (lo, hi) == pytest.approx((ci["m"][0, 0], ci["m"][1, 0]), abs=0.04)
    np.random.seed(0)
    _, ci = library.get_interval_estimates({"xy": (x, y)}, metrics.probability_of_improvement, reps=reps)
    point, lo, hi = probability_of_improvement(x, y, reps)
    assert point == pytest.approx(metrics.probability_of_improvement(x, y))
    assert (lo, hi) == pytest.approx(tuple(np.ravel(ci["xy"])), abs=0.04)
    assert lo < point < hi


def test_single_run_intervals_resample_start_states(scores):
    x, y = scores
    _, lo, hi = iqm_interval(x[:1], 500)
    assert hi - lo > 0.1
    _, lo, hi = probability_of_improvement(x[:1], y[:1], 500)
    assert lo < hi


def test_wilson_and_verdict():
    rate, lo, hi = wilson_interval(0, 32)
    assert rate == 0 and lo == 0 and 0.05 < hi < 0.15
    assert verdict((0.7, 0.55, 0.8)) == "wins"
    assert verdict((0.3, 0.2, 0.45)) == "loses"
    assert verdict((0.5, 0.4, 0.6)) == "ties"


def _row(method, decoding, returns, invalid=0):
    runs = [
        [{"returns": r, "wins": [v > 0.5 for v in r], "unparseable": invalid, "illegal": 0, "decisions": 10}]
        for r in returns
    ]
    return {"scenario": "6x6", "zero_shot": False, "method": method, "decoding": decoding, "runs": runs}


def test_summary_table_reports_each_baseline_against_dlm(tmp_path):
    from finetune.dlm.summary import summary_markdown

    good, bad = [[1.0, 1.0, 0.8, 1.0]] * 3, [[0.0, 0.2, 0.0, 0.1]] * 3
    rows = [
        _row("DLM-SFT", "free", bad, invalid=7),
        _row("DLM-SFT", "legal-constrained", good),
        _row("DLM-GRPO", "legal-constrained", bad),
        _row("BC (MLP per agent)", "legal-masked", [[0.5, 0.5, 0.5, 0.5]] * 3),
    ]
    (tmp_path / "results.json").write_text(__import__("json").dumps(rows))
    table = summary_markdown([tmp_path], reps=200).splitlines()
    bc = next(line for line in table if "BC (MLP" in line).split(" | ")
    assert bc[-2:] == ["1.00 [1.00, 1.00] wins", "0.00 [0.00, 0.00] loses |"]  # SFT beats BC, GRPO loses
    sft = next(line for line in table if "| DLM-SFT |" in line)
    assert "0.700 [" in sft  # 7 of 10 free decisions invalid, per run
    assert not any("DLM-SFT (free)" in line for line in table)


def test_merging_per_seed_results_rebuilds_the_pooled_table():
    """Known answer: the committed 2-seed evaluation, split into its seed-0 and seed-1 parts and merged
    back, gives the committed 2-seed table line for line (expert and prompted rows counted once)."""
    import copy
    import json
    from pathlib import Path

    from finetune.dlm.cli import CONFIG_DIR
    from finetune.dlm.config import load_config
    from finetune.dlm.report import merge_results, results_markdown

    res = Path(__file__).resolve().parents[2] / "finetune/dlm/results/lbf_smollm2_grpo24"
    pooled = json.loads((res / "results_seeds01.json").read_text())
    parts = [copy.deepcopy(pooled), copy.deepcopy(pooled)]
    for k, part in enumerate(parts):
        for row in part:
            if len(row["runs"]) == 2:
                row["runs"] = [row["runs"][k]]
    merged = merge_results(parts)
    assert [len(r["runs"]) for r in merged] == [len(r["runs"]) for r in pooled]
    cfg = load_config(CONFIG_DIR / "lbf_smollm2_cpu.yaml", ["train_seeds=[0,1]", "eval.episodes=16"])
    assert results_markdown(merged, cfg) == (res / "results_seeds01.md").read_text()
    with pytest.raises(ValueError, match="different rows"):
        merge_results([pooled, pooled[1:]])
    with pytest.raises(ValueError, match="different rows"):  # a part that stops early
        merge_results([pooled, pooled[:-1]])
