"""`LatentModel.capture` / `steer` against a maintained steering library (steering-vectors): same
activations, same steered logits for the same vector, layer and alpha."""

from __future__ import annotations

import importlib
import subprocess
import sys
import tempfile
from typing import TYPE_CHECKING

import pytest
import torch

if TYPE_CHECKING:
    from latent import LatentModel


def _steering_vectors():
    """steering-vectors, installed for this test run when absent. Its wheel pins transformers<5 although
    the code runs on 5.x, so it cannot be a declared extra: it goes into a temporary folder with
    `--no-deps` (pure Python); without registry access the parity tests skip and say so."""
    try:
        return importlib.import_module("steering_vectors")
    except ImportError:
        pass
    target = tempfile.mkdtemp(prefix="steering-vectors-")
    cmd = [
        sys.executable,
        "-m",
        "pip",
        "install",
        "-q",
        "--no-deps",
        "--target",
        target,
        "steering-vectors==0.12.2",
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        pytest.skip(
            f"cannot install steering-vectors (package registry unreachable?): {proc.stderr[-300:]}",
            allow_module_level=True,
        )
    sys.path.insert(0, target)
    return importlib.import_module("steering_vectors")


sv = _steering_vectors()


def _batch(m: LatentModel, same_length: bool):
    prompts = ["Tom has 23 apples. He buys 45 more.", "Mia had 12 pencils and gave 5 to Leo."]
    if same_length:
        prompts = [prompts[0], prompts[0].replace("23", "24")]
    return m.encode(prompts, chat=True)


def test_same_activations_at_every_layer(probe_model):
    m, _ = probe_model
    enc = _batch(m, same_length=False)
    layers = list(range(m.num_layers))
    with m.capture(layers) as ours:
        m.prefill(**enc)
    pos = (enc["attention_mask"].cumsum(1) - 1).clamp_min(0)
    with (
        sv.record_activations(m.model, layer_type="decoder_block", layer_nums=layers) as theirs,
        torch.no_grad(),
    ):
        m.model(**enc, position_ids=pos)
    for layer in layers:
        assert torch.allclose(ours[layer][0], theirs[layer][0], atol=1e-5, rtol=1e-5), layer


@pytest.mark.parametrize("alpha", [-4.0, 0.5, 3.0])
def test_same_steered_logits(probe_model, alpha):
    """Adding `alpha * v` at one layer: next-token logits agree with steering-vectors' patch, and the
    edit really changes them (not a no-op on both sides)."""
    m, _ = probe_model
    enc = _batch(m, same_length=True)  # steering-vectors also edits pad positions: compare unpadded rows
    torch.manual_seed(0)
    v = torch.randn(m.hidden_size)
    layer = m.num_layers - 1
    with torch.no_grad():
        plain = m.logits(m.prefill(**enc).last_hidden)
        with m.steer(layer, v, alpha=alpha):
            ours = m.logits(m.prefill(**enc).last_hidden)
        vec = sv.SteeringVector({layer: v}, layer_type="decoder_block")
        with vec.apply(m.model, multiplier=alpha):
            theirs = m.model(**enc).logits[:, -1].float()
    assert torch.allclose(ours, theirs, atol=1e-4, rtol=1e-4)
    assert (ours - plain).abs().max() > 1e-2
