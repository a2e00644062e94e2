"""Report statistics: the Wilson interval matches statsmodels; the time-ratio spread is per batch."""

import pytest

from eval.report import time_ratio_spread, wilson


@pytest.mark.parametrize("k, n", [(0, 5), (3, 10), (29, 32), (32, 32), (1, 1)])
def test_wilson_matches_statsmodels(k, n):
    proportion = pytest.importorskip("statsmodels.stats.proportion", reason="statsmodels is in [families]")
    lo, hi = proportion.proportion_confint(k, n, alpha=0.05, method="wilson")
    ours = wilson(k, n)
    assert ours == pytest.approx((lo, hi), abs=2e-3)  # statsmodels uses z = 1.95996, we use 1.96


def test_time_ratio_spread_pairs_items_of_the_same_batch():
    recs = [
        {"item_id": i, "method": m, "wall_s": t}
        for i, (a, b) in enumerate([(2.0, 1.0), (2.0, 1.0), (6.0, 2.0), (6.0, 2.0)])
        for m, t in (("text_mas", a), ("latent_mas", b))
    ]
    assert time_ratio_spread(recs) == {"median": 2.5, "min": 2.0, "max": 3.0, "batches": 2}
    assert time_ratio_spread([r for r in recs if r["method"] == "text_mas"]) is None
