"""Bad input gets a clear error naming the problem."""

import pytest
import torch

from latent import LatentModel, load_model


def test_missing_local_path():
    """A path that does not exist says so."""
    with pytest.raises(FileNotFoundError, match="no model directory"):
        load_model("./definitely/not/here")


def test_unavailable_hub_id_offline(monkeypatch):
    """A hub id not in the cache with HF_HUB_OFFLINE=1 explains the offline mode."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(OSError, match="HF_HUB_OFFLINE"):
        load_model("nobody-org/no-such-model-xyz")


def test_unknown_builtin_lists_available():
    """An unknown builtin name lists what is shipped."""
    with pytest.raises(ValueError, match="Available"):
        load_model("builtin:no-such-model")


@pytest.mark.parametrize("kind", ["bert", "t5"])
def test_non_causal_model(tmp_path, llama, kind):
    """Encoder-only and encoder-decoder checkpoints are rejected as not causal LMs."""
    from transformers import BertConfig, BertModel, T5Config, T5Model

    n = len(llama.tokenizer)
    if kind == "bert":
        model = BertModel(
            BertConfig(
                vocab_size=n, hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=16
            )
        )
    else:
        model = T5Model(T5Config(vocab_size=n, d_model=16, d_kv=8, d_ff=16, num_layers=1, num_heads=2))
    model.save_pretrained(tmp_path)
    llama.tokenizer.save_pretrained(tmp_path)
    with pytest.raises(ValueError, match="causal"):
        load_model(str(tmp_path))


def test_vocab_mismatch(llama):
    """A tokenizer larger than the embedding matrix is rejected."""
    from transformers import AutoModelForCausalLM

    from latent.testing import tiny_config

    small = AutoModelForCausalLM.from_config(tiny_config("llama", vocab_size=100))
    with pytest.raises(ValueError, match="vocabulary mismatch"):
        LatentModel(small, llama.tokenizer)


def test_negative_steps_layer_out_of_range_and_empty_batch(llama):
    """steps < 0, a layer index past the end, and an empty batch are rejected."""
    st = llama.prefill(**llama.encode(["hi"]))
    with pytest.raises(ValueError, match="steps"):
        llama.think(st, -1)
    with pytest.raises(ValueError, match="out of range"):
        with llama.capture([llama.num_layers]):
            pass
    with pytest.raises(ValueError, match="out of range"):
        with llama.steer(-llama.num_layers - 1, torch.zeros(llama.hidden_size)):
            pass
    with pytest.raises(ValueError, match="empty batch"):
        llama.encode([])
    with pytest.raises(ValueError, match="non-empty"):
        llama.prefill(torch.zeros((0, 3), dtype=torch.long))
    with pytest.raises(ValueError, match="shape"):
        with llama.steer(0, torch.zeros(3)):
            pass
