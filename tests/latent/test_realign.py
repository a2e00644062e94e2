"""Realignment: the ridge formula and the norm rescale."""

import numpy as np
import pytest
import torch

from latent.realign import Realigner, ridge_matrix


def test_ridge_matrix_matches_numpy_normal_equations():
    """W_a = (W_out^T W_out + lam I)^-1 W_out^T W_in, checked against a direct numpy solve."""
    rng = np.random.default_rng(0)
    w_in, w_out = rng.normal(size=(50, 8)), rng.normal(size=(50, 8))
    lam = 0.3
    direct = np.linalg.inv(w_out.T @ w_out + lam * np.eye(8)) @ w_out.T @ w_in
    got = ridge_matrix(torch.tensor(w_in), torch.tensor(w_out), lam).numpy()
    np.testing.assert_allclose(got, direct, rtol=1e-5, atol=1e-5)


def test_ridge_with_tied_embeddings_is_near_identity():
    """When W_in == W_out (tied), the ridge solution with tiny lambda is the identity map."""
    w = torch.randn(40, 6)
    np.testing.assert_allclose(ridge_matrix(w, w, 1e-8).numpy(), np.eye(6), atol=1e-5)


def test_realigned_vectors_have_mean_input_row_norm():
    """Both methods rescale to the mean norm of the input-embedding rows."""
    w_in, w_out = torch.randn(30, 5) * 3, torch.randn(30, 5)
    target = w_in.norm(dim=-1).mean()
    for method in ("ridge", "identity"):
        out = Realigner.from_embeddings(w_in, w_out, method=method)(torch.randn(4, 5))
        torch.testing.assert_close(out.norm(dim=-1), target.expand(4), rtol=1e-5, atol=1e-5)


def test_bad_realign_inputs_raise():
    """Unknown method, negative lambda and mismatched shapes are clear errors."""
    with pytest.raises(ValueError, match="unknown realignment"):
        Realigner.from_embeddings(torch.randn(3, 2), torch.randn(3, 2), method="svd")
    with pytest.raises(ValueError, match="lam"):
        ridge_matrix(torch.randn(3, 2), torch.randn(3, 2), lam=-1)
    with pytest.raises(ValueError, match="differ in shape"):
        ridge_matrix(torch.randn(3, 2), torch.randn(4, 2))


def test_model_aligner_chunk_by_chunk_is_the_table_ridge_map():
    """`Realigner.from_model` (statistics accumulated over chunks of the vocabulary) solves the same ridge
    system as `ridge_matrix` on the whole table, and rescales to the same norm."""
    torch.manual_seed(0)
    w_in, w_out = torch.randn(50, 8), torch.randn(50, 8)
    emb = torch.nn.Embedding(50, 8)
    emb.weight.data.copy_(w_in)
    chunked = Realigner.from_model(emb, w_out, lam=0.3, chunk=7)
    whole = Realigner.from_embeddings(w_in, w_out, lam=0.3)
    torch.testing.assert_close(chunked.matrix, ridge_matrix(w_in, w_out, 0.3), rtol=1e-6, atol=1e-6)
    assert chunked.target_norm == pytest.approx(whole.target_norm, rel=1e-6)
    assert Realigner.from_model(emb, w_out, method="identity").matrix is None


class _Scaled(torch.nn.Module):
    """An embedding module that scales its rows, as Gemma's does."""

    def __init__(self, weight: torch.Tensor, scale: float):
        super().__init__()
        self.weight = torch.nn.Parameter(weight.clone())
        self.scale = scale

    def forward(self, ids):
        return self.weight[ids] * self.scale


def test_soft_tokens_are_the_predicted_mixture_of_input_embeddings():
    """`soft`: e = softmax(h W_out^T / T) W_in, with W_in as the embedding module returns its rows (scaled
    rows included); a peaked prediction gives that token's own embedding."""
    from latent.realign import SoftTokenAligner

    torch.manual_seed(0)
    w_in, w_out, h = torch.randn(30, 5), torch.randn(30, 5), torch.randn(4, 5)
    emb = torch.nn.Embedding(30, 5)
    emb.weight.data.copy_(w_in)
    soft = SoftTokenAligner.from_model(emb, w_out, temperature=0.7, chunk=7)
    assert soft.w_in.data_ptr() == emb.weight.data_ptr()  # rows returned unchanged: no copy
    torch.testing.assert_close(soft(h), torch.softmax(h @ w_out.T / 0.7, -1) @ w_in)
    scaled = SoftTokenAligner.from_model(_Scaled(w_in, 3.0), w_out, chunk=7)
    torch.testing.assert_close(scaled(h), torch.softmax(h @ w_out.T, -1) @ (3.0 * w_in))
    peaked = 1000.0 * w_out[[2, 9]]  # hidden states that predict tokens 2 and 9 with near certainty
    torch.testing.assert_close(soft(peaked), w_in[[2, 9]], rtol=1e-4, atol=1e-4)
    with pytest.raises(ValueError, match="temperature"):
        SoftTokenAligner.from_model(emb, w_out, temperature=0)


def test_eval_lists_every_realignment_the_model_takes():
    """`latentworks eval --realign` offers what `load_model(realign=...)` takes (restated without torch)."""
    from eval.config import REALIGN
    from latent.realign import REALIGN_METHODS

    assert REALIGN == REALIGN_METHODS


def test_a_model_thinks_with_soft_tokens(tiny_models):
    """`load_model(realign="soft")` feeds back soft tokens, batch 1 == batch 2 with left padding."""
    from latent import load_model

    path = tiny_models["qwen2"].model.name_or_path
    m = load_model(path, realign="soft")
    prompts = ["a b c d e f", "g h"]
    st = m.prefill(**m.encode(prompts, chat=True))
    thoughts, _, hidden = m.think(st, 3, return_hidden=True)
    w_in = m.model.get_input_embeddings().weight
    w_out = m.model.get_output_embeddings().weight
    torch.testing.assert_close(thoughts, torch.softmax(hidden @ w_out.T, -1) @ w_in, rtol=1e-5, atol=1e-5)
    alone, _ = m.think(m.prefill(**m.encode(prompts[1:], chat=True)), 3)
    torch.testing.assert_close(thoughts[1:], alone, rtol=1e-4, atol=1e-5)
