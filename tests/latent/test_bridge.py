"""Bridges (`latent/bridge.py`): a trainable map from one model's thoughts into another's input space
gets gradients through the receiver, and a saved bridge reloads, by name, to identical receiver inputs."""

from __future__ import annotations

import pytest
import torch

from latent.bridge import Bridge, resolve_bridge_path, shared_tokens
from latent.memory import WorkingMemory
from latent.testing import tiny_pair


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    return tiny_pair(tmp_path_factory.mktemp("pair"))


def _sender_thoughts(sender, k: int = 3) -> tuple[WorkingMemory, int]:
    mem = WorkingMemory(sender)
    enc = sender.encode([[{"role": "user", "content": "Ann's code is 47."}]] * 2)
    st, pid = mem.write_tokens("holder", "prompt", enc["input_ids"], enc["attention_mask"], None, [], sender)
    _, lid = mem.write_latent("holder", st, k, [pid], sender)
    return mem, lid


def test_a_bridge_maps_widths_at_the_receiver_norm(pair):
    """(B, L, D_s) -> (B, L, D_r), every output at the receiver's mean input-embedding norm."""
    sender, receiver = pair
    bridge = Bridge.from_models(sender, receiver, "s", "r")
    assert len(shared_tokens(sender.tokenizer, receiver.tokenizer)[0]) >= 64  # ridge init, not orthogonal
    out = bridge(torch.randn(2, 3, sender.hidden_size))
    norm = receiver.model.get_input_embeddings().weight.detach().norm(dim=-1).mean()
    assert out.shape == (2, 3, receiver.hidden_size)
    torch.testing.assert_close(out.norm(dim=-1), torch.full((2, 3), float(norm)), rtol=1e-4, atol=1e-4)


def test_a_bridge_gets_gradients_through_the_receiver(pair):
    """The receiver's loss on what it reads through the bridge reaches every bridge weight; the sender's
    thoughts, written without gradients, hand the sender none."""
    sender, receiver = pair
    bridge = Bridge.from_models(sender, receiver)
    mem, lid = _sender_thoughts(sender)
    mem.grad = True
    state = mem.state_for([lid], receiver, {lid: bridge})
    state.last_hidden.pow(2).sum().backward()
    assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in bridge.parameters())
    assert all(p.grad is None for p in sender.model.parameters())
    receiver.model.zero_grad(set_to_none=True)


def test_a_saved_bridge_reloads_by_name_to_identical_receiver_inputs(pair, tmp_path, monkeypatch):
    """Saved into the model cache under a name, a trained bridge loads by that name, names its two models,
    and hands the receiver exactly the same input embeddings and state."""
    sender, receiver = pair
    monkeypatch.setenv("LATENTWORKS_CACHE", str(tmp_path / "cache"))
    bridge = Bridge.from_models(sender, receiver, "tiny-sender", "tiny-receiver", kind="mlp", mlp_hidden=16)
    with torch.no_grad():  # away from the initialisation, so the check covers trained weights
        for p in bridge.parameters():
            p.add_(0.05 * torch.randn_like(p))
    bridge.save_pretrained(tmp_path / "cache" / "models" / "tiny-bridge")
    again = Bridge.from_pretrained("tiny-bridge")
    assert (again.sender, again.receiver, again.kind) == ("tiny-sender", "tiny-receiver", "mlp")
    mem, lid = _sender_thoughts(sender)
    a, _ = mem.embeddings([lid], {lid: bridge})
    b, _ = mem.embeddings([lid], {lid: again})
    assert torch.equal(a, b)
    sa, sb = mem.state_for([lid], receiver, {lid: bridge}), mem.state_for([lid], receiver, {lid: again})
    assert torch.equal(sa.last_hidden, sb.last_hidden)


def test_an_unknown_bridge_names_where_it_looked_and_the_fix(tmp_path, monkeypatch):
    monkeypatch.setenv("LATENTWORKS_CACHE", str(tmp_path))
    with pytest.raises(FileNotFoundError, match="no bridge 'nope'.*latentworks finetune mas --sender"):
        resolve_bridge_path("nope")
