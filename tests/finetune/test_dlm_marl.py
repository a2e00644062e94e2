"""Offline MARL baselines (QMIX + CQL, CFCQL): a known matrix-game result and legal play on LBF data."""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("lbforaging", reason="DLM environments need `pip install lbforaging`")

from finetune.dlm.marl_baselines import JointData, joint_arrays, train_mixer_cql  # noqa: E402


def _matrix_game(payoff: torch.Tensor, n_rows: int = 2000) -> JointData:
    """One-step cooperative game, uniformly random joint actions (full coverage), constant observation."""
    g = torch.Generator().manual_seed(0)
    a = torch.randint(0, 3, (n_rows, 2), generator=g)
    x = torch.ones(n_rows, 2, 5)  # [agent id one-hot, legal mask of 3 actions]: agents are told apart
    x[:, 0, 1] = 0.0
    x[:, 1, 0] = 0.0
    return JointData(
        x=x,
        a=a,
        legal=torch.ones(n_rows, 2, 3),
        valid=torch.ones(n_rows, 2),
        r=payoff[a[:, 0], a[:, 1]],
        done=torch.ones(n_rows),
        next=torch.full((n_rows,), -1),
    )


@pytest.mark.parametrize("method", ["qmix_cql", "cfcql"])
def test_value_decomposition_recovers_the_optimum_of_a_monotonic_matrix_game(method):
    # additive payoff (QMIX can represent it exactly); the optimum (2, 1) is not the most frequent action
    u1, u2 = torch.tensor([0.0, 0.3, 1.0]), torch.tensor([0.2, 1.0, 0.0])
    data = _matrix_game(u1[:, None] + u2[None, :])
    pol = train_mixer_cql("lbforaging", data, method=method, steps=600, alpha=0.1, seed=0)
    greedy = pol.net(data.x[:1]).argmax(-1).squeeze(0).tolist()
    assert greedy == [int(u1.argmax()), int(u2.argmax())] == [2, 1]


@pytest.mark.parametrize("method", ["qmix_cql", "cfcql"])
def test_mixer_baselines_train_on_lbf_data_and_act_legally(method):
    from finetune.dlm.data import collect_episodes
    from finetune.dlm.evaluate import run_episodes

    rows, _ = collect_episodes("lbforaging", "6x6-2p-2f", "good", 4, seed=1)
    pol = train_mixer_cql("lbforaging", joint_arrays("lbforaging", rows), method=method, steps=60)
    stats = run_episodes("lbforaging", "6x6-2p-2f", pol, episodes=2, seed=0, max_steps=10)
    assert stats.decisions > 0 and stats.illegal == 0 and stats.unparseable == 0
    # zero-shot to a larger team: the decentralised agent network does not depend on the team size
    stats = run_episodes("lbforaging", "8x8-3p-2f", pol, episodes=1, seed=0, max_steps=5)
    assert stats.illegal == 0
