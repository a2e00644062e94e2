"""bench/studies/thought_geometry.py: the channel share and nearest-token measures it reports."""

import importlib.util
import sys
from pathlib import Path

import torch

STUDIES = Path(__file__).resolve().parents[2] / "bench" / "studies"


def _load():
    sys.path.insert(0, str(STUDIES))
    spec = importlib.util.spec_from_file_location("thought_geometry", STUDIES / "thought_geometry.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules["thought_geometry"] = mod
    spec.loader.exec_module(mod)
    return mod


def test_channel_share_is_one_for_a_single_channel_and_k_over_d_when_spread():
    tg = _load()
    rows = torch.tensor([[0.0, 3.0, 0.0, 0.0], [1.0, -1.0, 1.0, -1.0]])
    assert torch.allclose(tg.channel_shares(rows, 1), torch.tensor([1.0, 0.25], dtype=torch.float64))
    assert torch.allclose(tg.channel_shares(rows, 2), torch.tensor([1.0, 0.5], dtype=torch.float64))


def test_nearest_cosine_can_leave_the_row_itself_out():
    tg = _load()
    emb = torch.tensor([[1.0, 0.0], [0.6, 0.8], [0.0, 1.0]])
    assert torch.allclose(tg.nearest_cos(emb, emb), torch.ones(3))
    others = tg.nearest_cos(emb, emb, exclude=[0, 1, 2])
    assert torch.allclose(others, torch.tensor([0.6, 0.8, 0.8]))
