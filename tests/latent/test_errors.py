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


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"name_or_path": None}, "model must be a non-empty string"),
        ({"name_or_path": 123}, "model must be a non-empty string"),
        ({"name_or_path": "builtin:arith-mini", "dtype": "float33"}, "unknown dtype 'float33'"),
        ({"name_or_path": "builtin:arith-mini", "device": "cuda:7"}, "device 'cuda:7'"),
        ({"name_or_path": "builtin:arith-mini", "device": "tpu"}, "device 'tpu'"),
    ],
)
def test_load_model_bad_arguments_fail_before_loading(kwargs, message):
    """Each names the problem and the fix; none reaches transformers (no weights are read)."""
    import torch

    from latent import load_model

    if "cuda" in str(kwargs.get("device")) and torch.cuda.device_count() > 7:
        pytest.skip("this machine really has a cuda:7")
    with pytest.raises((TypeError, ValueError), match=message):
        load_model(**kwargs)


def test_encode_refuses_a_bare_string_and_non_string_prompts(llama):
    with pytest.raises(TypeError, match="wrap a single prompt in a list"):
        llama.encode("abc")
    with pytest.raises(TypeError, match="prompt 1 is int"):
        llama.encode(["fine", 123])


@pytest.mark.parametrize("alpha", [float("nan"), float("inf"), "big"])
def test_steer_refuses_non_finite_alpha(llama, alpha):
    import torch

    with (
        pytest.raises(ValueError, match="finite number"),
        llama.steer(0, torch.ones(llama.hidden_size), alpha=alpha),
    ):
        pass


def test_input_past_the_context_length_is_a_clear_error(llama):
    import torch

    limit = llama.config.max_position_embeddings
    ids = torch.full((1, limit + 1), 5, dtype=torch.long)
    with pytest.raises(ValueError, match="runs past the model's context"):
        llama.prefill(ids)
    st = llama.prefill(ids[:, : limit - 2])
    with pytest.raises(ValueError, match="max_position_embeddings"):  # thoughts count too
        llama.think(st, 4)
