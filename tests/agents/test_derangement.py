"""`agents.latentmas.derangement`, the project's one derangement: the `thoughts="other"` control of
`agents.run` and the thought-channel trainer both draw from it, and committed controls
(`bench/results/handoff_*.json`, the Qwen table's `thoughts-other` cells) depend on its draws."""

from __future__ import annotations

import pytest
import torch

from agents.latentmas import derangement


def test_derangement_is_a_permutation_without_fixed_points():
    """Every row reads another row, and every row is read once, for small and odd batch sizes alike."""
    for n in (2, 3, 5, 8, 17):
        for seed in range(20):
            perm = derangement(n, seed)
            assert sorted(perm.tolist()) == list(range(n))
            assert not bool((perm == torch.arange(n)).any())


def test_derangement_draws_are_pinned():
    """The same seed gives the same rows as when the committed controls were run (randperm, then shift)."""
    assert derangement(8, 0).tolist() == [5, 7, 4, 6, 2, 0, 3, 1]
    assert derangement(5, 3).tolist() == [3, 0, 1, 4, 2]
    assert derangement(16, 16).tolist() == [11, 4, 15, 5, 7, 14, 13, 8, 6, 3, 9, 1, 10, 0, 2, 12]


def test_derangement_refuses_a_single_row():
    """One question has no other question to read: the message names the control."""
    with pytest.raises(ValueError, match="thoughts='other'"):
        derangement(1, 0)
