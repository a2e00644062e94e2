"""bench/speed/vs_official.py refuses to run without a checkout of the official code, with a message that
says how to get one, before loading anything."""

import importlib.util
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench" / "speed"


def _load(name):
    spec = importlib.util.spec_from_file_location(name, BENCH / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod  # dataclasses look their module up while the file runs
    spec.loader.exec_module(mod)
    return mod


def test_skipped_with_a_clear_message_without_official(capsys):
    assert _load("vs_official").main([]) == 2
    err = capsys.readouterr().err
    assert "skipped" in err and "--official DIR" in err


def test_a_folder_that_is_not_a_checkout_is_named(tmp_path):
    (tmp_path / "models.py").write_text("")
    with pytest.raises(ValueError, match="missing methods/latent_mas.py"):
        _load("official_adapter").check_official_dir(str(tmp_path))


def test_work_ceiling_counts_padded_rows_and_the_lm_head_against_real_tokens():
    import torch

    official = torch.ones((2, 10), dtype=torch.long)  # right padding: every row read to the longest
    ours = torch.tensor([[0] * 6 + [1] * 4, [1] * 10])  # real tokens 4 + 10
    # official (10 + 2 steps) x 2 rows x 1.5 (LM head) = 36; ours 14 + 2 steps x 2 rows = 18
    assert _load("vs_official").work_ceiling(official, ours, 2, {"ceiling": 1.5}) == pytest.approx(2.0)


def test_shared_weights_copy_shares_tensors_and_resizes_alone(tmp_path):
    """The official loader under `shared_weights` returns a module copy whose weights are our tensors;
    resizing its embedding table (as the official code does) leaves our model untouched."""
    import types

    from latent import load_model
    from latent.testing import tiny_model

    tiny_model("llama", tmp_path, hidden_size=32)
    m = load_model(str(tmp_path), device="cpu")
    real = object()
    off = types.SimpleNamespace(models=types.SimpleNamespace(AutoModelForCausalLM=real))
    with _load("official_adapter").shared_weights(off, m.model):
        copy = off.models.AutoModelForCausalLM.from_pretrained(str(tmp_path), torch_dtype=None)
    assert off.models.AutoModelForCausalLM is real  # the loader is restored on exit
    assert copy is not m.model and copy.config is not m.model.config
    ours = dict(m.model.named_parameters())
    assert all(p.data_ptr() == ours[n].data_ptr() for n, p in copy.named_parameters())
    rows = m.model.get_input_embeddings().weight.shape[0]
    copy.resize_token_embeddings(rows - 3)
    assert m.model.get_input_embeddings().weight.shape[0] == rows


def test_one_solve_is_the_aligner_it_is_bound_to():
    """`OneSolve` (ours under --shared-solve) calls and reads the aligner it is bound to."""
    import torch

    from latent.realign import Realigner

    one = _load("vs_official").OneSolve()
    one.aligner = Realigner(matrix=torch.eye(4) * 2, target_norm=3.0)
    h = torch.randn(2, 4)
    assert torch.equal(one(h), one.aligner(h)) and one.target_norm == 3.0
