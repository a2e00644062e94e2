"""On the dormancy task (label carried by event timing only), MemExplainer finds the trigger and IG does not."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch

from families.memexplainer import MemExplainerConfig, make_streams
from families.memexplainer.explain import choose_events, explain_streams
from families.memexplainer.model import accuracy, train_tgn


def test_memory_tree_finds_a_timing_trigger_that_integrated_gradients_misses() -> None:
    """Recall@2 of the event ending the silence: MemExplainer top-k high, captum IG near chance."""
    pytest.importorskip("captum", reason="integrated gradients baseline")
    from families.memexplainer.baselines import integrated_gradients, topk_events

    torch.set_num_threads(1)
    torch.manual_seed(0)
    cfg = MemExplainerConfig(task="dormancy", seed=0, train_steps=120, selection="topk")
    model = train_tgn(cfg, make_streams(384, cfg, seed=0))
    test = make_streams(60, cfg, seed=1)
    assert accuracy(model, test) > 0.9
    m64 = copy.deepcopy(model).double().eval()
    with torch.no_grad():
        z = m64(test).numpy()
    tp = np.flatnonzero((test.label.numpy() == 1) & (z > 0))
    sub = test.subset(torch.from_numpy(tp))
    trig = sub.trigger_step.numpy()
    rng = np.random.default_rng(0)
    ours = [trig[i] in choose_events(e, 2, cfg, rng) for i, e in enumerate(explain_streams(m64, sub))]
    ig = integrated_gradients(m64, sub, n_steps=16).numpy()
    theirs = [trig[i] in topk_events(ig[i], 2, rng, float(z[tp[i]])) for i in range(len(tp))]
    assert len(tp) >= 20
    assert np.mean(ours) >= 0.8
    assert np.mean(theirs) <= 0.4
