"""The attention implementation as a setting: names checked before a model loads, flash attention refused
for sliding-window models (their 4-D position masks), everywhere a model can be loaded or wrapped."""

import pytest
import torch

from latent.attention import attention_problem
from latent.loading import load_model
from latent.model import LatentModel


def test_known_names_and_hub_kernels_pass():
    """transformers' names and a kernels-hub name are accepted; a typo is refused with the list."""
    for name in (None, "eager", "sdpa", "flash_attention_2", "kernels-community/flash-attn"):
        assert attention_problem(name) is None, name
    assert "use one of eager, sdpa" in attention_problem("flash2")


def test_flash_attention_is_refused_for_sliding_window_models_and_on_a_cpu():
    """Sliding-window models get 4-D masks, which flash attention cannot read; flash runs only on CUDA."""
    why = attention_problem("flash_attention_2", sliding_window=True)
    assert "sliding-window" in why and "attn_implementation='sdpa'" in why
    assert "CUDA devices only" in attention_problem("flash_attention_2", device="cpu")
    assert attention_problem("flash_attention_2", device="cuda:1") is None
    assert attention_problem("sdpa", sliding_window=True, device="cpu") is None


def test_load_model_refuses_flash_for_a_sliding_window_model_before_loading(tiny_models, monkeypatch):
    """`load_model` reads the config only: the weights of a sliding-window model (Gemma 3) never load when
    flash attention is asked for."""
    import transformers

    def no_load(*a, **k):
        raise AssertionError("the weights were loaded before the attention check")

    monkeypatch.setattr(transformers.AutoModelForCausalLM, "from_pretrained", no_load)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)  # as on a GPU machine
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    path = tiny_models["gemma3"].model.name_or_path
    with pytest.raises(ValueError, match="sliding-window layers"):
        load_model(path, device="cuda", attn_implementation="flash_attention_2")
    with pytest.raises(ValueError, match="CUDA devices only"):
        load_model(
            tiny_models["llama"].model.name_or_path, device="cpu", attn_implementation="flash_attention_2"
        )


def test_wrapping_a_flash_sliding_window_model_is_refused(tiny_models):
    """A model the user loaded with flash attention cannot be wrapped when it has sliding-window layers;
    the same model with sdpa can."""
    g = tiny_models["gemma3"]
    g.model.config._attn_implementation = "flash_attention_2"
    try:
        with pytest.raises(ValueError, match="sdpa"):
            LatentModel(g.model, g.tokenizer)
    finally:
        g.model.config._attn_implementation = "eager"
    LatentModel(g.model, g.tokenizer)


def test_eval_config_checks_attention_and_placement_before_running(tmp_path):
    """`latentworks eval` settings: an unknown attention name, flash on a CPU, and --device with
    --device-map are refused together, before anything runs."""
    from eval.config import EvalConfig

    with pytest.raises(ValueError) as err:
        EvalConfig(
            out=str(tmp_path / "r"), attn_implementation="flash_attention_2", device="cpu", device_map="auto"
        )
    assert "CUDA devices only" in str(err.value) and "not both" in str(err.value)
    with pytest.raises(ValueError, match="unknown `attn_implementation`"):
        EvalConfig(out=str(tmp_path / "r"), attn_implementation="flashy")
    assert (
        EvalConfig(out=str(tmp_path / "r"), attn_implementation="sdpa", device_map="auto").device_map
        == "auto"
    )
