"""Graphs across two models (`agents/graph_models.py`, `agents.run` with bridges): a file gives each agent
its model and a `latent` edge its bridge; an edge between models whose caches differ, without a bridge,
is refused in one error before any weights load; the final agent never reads a share in its tokens; a
two-model graph file runs end to end on tiny models."""

from __future__ import annotations

import pytest
import yaml

import agents
import latent.loading
from agents.graph import Graph
from eval.tasks import handoff as th
from latent.bridge import Bridge
from latent.testing import tiny_pair


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    root = tmp_path_factory.mktemp("pair")
    sender, receiver = tiny_pair(root)
    bridge_dir = Bridge.from_models(
        sender, receiver, str(root / "sender"), str(root / "receiver")
    ).save_pretrained(root / "bridge")
    return sender, receiver, root, bridge_dir


def _graph_file(tmp_path, root, modes: list[str], bridge: str | None = None):
    """holder_0, holder_1 (sender) -> answerer (receiver), edges of `modes`, from a YAML file."""
    spec = {
        "agents": [
            {"name": "holder_0", "role": "holder", "model": str(root / "sender")},
            {"name": "holder_1", "role": "holder", "model": str(root / "sender")},
            {"name": "answerer", "role": "answerer", "model": str(root / "receiver")},
        ],
        "edges": [
            {"src": f"holder_{i}", "dst": "answerer", "mode": m, **({"bridge": bridge} if bridge else {})}
            for i, m in enumerate(modes)
        ],
    }
    path = tmp_path / "g.yaml"
    path.write_text(yaml.safe_dump(spec))
    return Graph.from_file(path)


def test_edges_across_models_without_a_bridge_are_refused_in_one_error_before_loading(
    pair, tmp_path, monkeypatch
):
    """A latent and a kv edge between models of other widths and tokenizers: one error names both edges,
    both models and the fix (a bridge on a latent edge; kv never crosses models), and no weights load."""
    _, _, root, _ = pair
    monkeypatch.setattr(latent.loading, "load_model", lambda *a, **k: pytest.fail("loaded a model"))
    g = _graph_file(tmp_path, root, ["latent", "kv"])
    with pytest.raises(ValueError) as err:
        agents.load_graph_models(g)
    msg = str(err.value)
    assert msg.startswith("models cannot share latent memory: ") and msg.count("Traceback") == 0
    assert "latent edge holder_0->answerer" in msg and "kv edge holder_1->answerer" in msg
    assert f"{str(root / 'sender')!r} and {str(root / 'receiver')!r}" in msg
    assert "different hidden_size (64 vs 48)" in msg and "`bridge: NAME`" in msg
    assert "kv edges cannot cross models" in msg


def test_loaded_models_without_a_bridge_are_refused_with_the_same_error(pair):
    sender, receiver, _, _ = pair
    g = agents.handoff_graph(2, "latent", holder_model="s")
    with pytest.raises(
        ValueError, match=r"latent edge holder_0->answerer joins models 's' and 'default'.*`bridge: NAME`"
    ):
        agents.run(
            g,
            {"s": sender, "default": receiver},
            ["What is Ann's code?"],
            prompts="handoff",
            shares=[["a", "b"]],
        )


def test_a_bridge_on_a_kv_edge_or_of_other_widths_is_refused(pair, tmp_path):
    sender, receiver, root, bridge_dir = pair
    with pytest.raises(
        ValueError, match="a bridge carries latent thoughts between two models, so it goes on a `latent` edge"
    ):
        _graph_file(tmp_path, root, ["kv", "kv"], bridge=str(bridge_dir))
    backwards = Bridge(48, 64).save_pretrained(tmp_path / "backwards")
    g = _graph_file(tmp_path, root, ["latent", "latent"], bridge=str(backwards))
    with pytest.raises(ValueError, match=r"bridge .* maps 48 -> 64"):
        agents.check_graph_models(g)


def _run(pair, tmp_path, items, k=2):
    _, _, root, bridge_dir = pair
    g = _graph_file(tmp_path, root, ["latent", "latent"], bridge=str(bridge_dir))
    models, bridges = agents.load_graph_models(g, device="cpu", attn_implementation="eager")
    res = agents.run(
        g, models, [it.question for it in items], prompts="handoff", latent_steps=k, max_new_tokens=4,
        shares=[it.shares for it in items], bridges=bridges, batch_size=len(items),
    )  # fmt: skip
    return models, res


def test_a_two_model_graph_file_runs_end_to_end(pair, tmp_path):
    """From the file: the holders think on the sender, the answerer reads 2 x k bridged thoughts and
    decodes; its memory is the receiver's (width 48), read through the bridge."""
    items = th.make_items("pick", 3, "test")
    models, res = _run(pair, tmp_path, items, k=2)
    assert {m.hidden_size for m in models.values()} == {64, 48}
    assert len(res) == 3
    for r in res:
        holders, answerer = r.agents[:2], r.agents[2]
        assert [a.latent_steps for a in holders] == [2, 2] and answerer.latent_steps == 0
        assert answerer.memory_positions == 4 and isinstance(r.text, str)


def test_shares_never_reach_the_receivers_tokens(pair, tmp_path, monkeypatch):
    """Every token the receiver (the answerer's model) reads is free of the shares, while the sender (the
    holders') reads each one: the answerer learns them only through the bridged thoughts."""
    items = th.make_items("pick", 2, "test")
    seen: dict[int, list[str]] = {}
    real_encode = type(pair[0]).encode

    def spy(self, messages, **kw):
        enc = real_encode(self, messages, **kw)
        seen.setdefault(self.hidden_size, []).extend(self.tokenizer.batch_decode(enc["input_ids"]))
        return enc

    monkeypatch.setattr(type(pair[0]), "encode", spy)
    _run(pair, tmp_path, items)
    shares = [s for it in items for s in it.shares]
    receiver_text, sender_text = " ".join(seen[48]), " ".join(seen[64])
    assert all(s.split()[-1].rstrip(".") in sender_text for s in shares)  # the check can see a share
    for s in shares:
        assert s not in receiver_text and s.split()[-1].rstrip(".") not in receiver_text, s
