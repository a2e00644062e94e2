"""Every verdict is gated on its instrument's validity: an instrument at chance on labelled pairs gives
"instrument invalid", never "supported", whatever its between-condition shifts say."""

from __future__ import annotations

import numpy as np

from probes.directions import auroc
from probes.e1 import verdicts
from probes.stats import INVALID, cluster_bootstrap, gate, instrument_valid


def _labelled_auroc(signal: float, n_pairs: int = 40, seed: int = 0) -> dict:
    """Clustered AUROC interval of an instrument whose score is `signal * label + noise` on labelled pairs."""
    rng = np.random.default_rng(seed)
    pairs = np.repeat(np.arange(n_pairs), 4)
    y = np.tile([0, 1, 0, 1], n_pairs)
    score = signal * y + rng.normal(size=len(y))
    return cluster_bootstrap(lambda i: auroc(score[i], y[i]), [pairs], 400, seed=seed)


def _ci(mean: float, lo: float, hi: float) -> dict:
    return dict(mean=mean, lo=lo, hi=hi)


def _e1_stats(probe_auroc: dict, elicited_auroc: dict) -> dict:
    """E1 statistics in which every shift clears its null: the run that once read "supported" throughout."""
    return dict(
        probe_heldout_auroc=probe_auroc,
        paired_shifts={
            "deployed-none": _ci(0.02, -0.02, 0.06),
            "evaluation-none": _ci(0.2, 0.16, 0.23),
            "evaluation-deployed": _ci(0.18, 0.14, 0.22),
        },
        p_eval_contrast_auroc=elicited_auroc,
        # elicited P(eval) at 0.48-0.52 everywhere, shifting by one point: an instrument at chance
        p_eval_by_assertion={a: _ci(0.49, 0.48, 0.5) for a in ("none", "deployed", "evaluation")},
        p_eval_shifts={
            "deployed-none": _ci(-0.01, -0.02, -0.01),
            "evaluation-none": _ci(0.0, -0.01, 0.0),
            "evaluation-deployed": _ci(0.01, 0.01, 0.02),
        },
        agreement={"rho_shift_eval_minus_deployed": _ci(0.3, 0.1, 0.5)},
    )


def test_chance_level_elicited_instrument_gives_instrument_invalid():
    chance, strong = _labelled_auroc(0.0), _labelled_auroc(3.0)
    assert chance["lo"] < 0.5 < chance["hi"] and not instrument_valid(chance)
    assert strong["lo"] > 0.8 and instrument_valid(strong)
    v = verdicts(_e1_stats(strong, chance))
    elicited = {k: x for k, x in v.items() if k.startswith("elicited") or k.startswith("instruments")}
    assert len(elicited) == 4
    assert all(x.startswith(INVALID) for x in elicited.values()), elicited
    # the probe is valid here, so its verdicts still come from the decision rule
    assert v["probe reads the assertion's meaning (z evaluation - deployed > 0)"] == "supported"


def test_valid_instruments_keep_the_decision_rule_and_an_invalid_probe_is_gated_too():
    strong = _labelled_auroc(3.0)
    v = verdicts(_e1_stats(strong, strong))
    assert v["elicited: P(eval | deployed) > 0.15 (the paper's lower bound)"] == "supported"
    assert v["elicited reads the assertion's meaning (P evaluation - deployed > 0)"] == "supported"
    w = verdicts(_e1_stats(_labelled_auroc(0.0, seed=1), strong))
    assert w["probe reads the assertion's meaning (z evaluation - deployed > 0)"].startswith(INVALID)
    assert w["instruments agree on shifts (rho > 0)"].startswith(INVALID)


def test_gate_rejects_an_instrument_whose_interval_touches_or_lies_below_chance():
    assert gate("supported", _ci(0.6, 0.51, 0.7), "x") == "supported"
    assert gate("supported", _ci(0.55, 0.5, 0.6), "x").startswith(INVALID)  # lower end at chance
    assert gate("supported", _ci(0.2, 0.1, 0.3), "x").startswith(INVALID)  # reversed instrument
