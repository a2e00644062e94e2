"""Single bf16 rows through `torch.mv` (`latent.cpu_gemv`): the same numbers as `F.linear`, taken only
for single bf16 CPU rows without autograd, and routed on bf16 CPU models only."""

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from latent.cpu_gemv import route_single_rows, single_row_linear, unroute_single_rows


def _counting_mv(monkeypatch) -> list[int]:
    calls = []
    real = torch.mv

    def mv(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(torch, "mv", mv)
    return calls


@pytest.mark.parametrize("shape", [(37,), (1, 37), (1, 1, 37)])
@pytest.mark.parametrize("bias", [True, False])
def test_single_row_equals_linear(shape, bias, monkeypatch):
    calls = _counting_mv(monkeypatch)
    layer = nn.Linear(37, 23, bias=bias).to(torch.bfloat16)
    x = torch.randn(shape, dtype=torch.bfloat16)
    with torch.no_grad():
        got = single_row_linear(layer, x)
        want = F.linear(x, layer.weight, layer.bias)
    assert calls, "a single bf16 row must take the torch.mv path"
    assert got.shape == want.shape == (*shape[:-1], 23)
    torch.testing.assert_close(got.float(), want.float(), rtol=1e-2, atol=1e-2)


@pytest.mark.parametrize(
    "dtype, rows, grad", [(torch.float32, 1, False), (torch.bfloat16, 2, False), (torch.bfloat16, 1, True)]
)
def test_other_inputs_keep_linear(dtype, rows, grad, monkeypatch):
    calls = _counting_mv(monkeypatch)
    layer = nn.Linear(16, 8).to(dtype)
    x = torch.randn(rows, 16, dtype=dtype, requires_grad=grad)
    out = single_row_linear(layer, x)
    assert not calls
    assert torch.equal(out, F.linear(x, layer.weight, layer.bias))
    if grad:
        out.float().sum().backward()
        assert x.grad is not None and layer.weight.grad is not None


def test_route_skips_subclasses_and_is_idempotent():
    class Custom(nn.Linear):
        pass

    model = nn.Sequential(nn.Linear(4, 4), Custom(4, 4), nn.Sequential(nn.Linear(4, 2)))
    assert route_single_rows(model) == 2
    assert route_single_rows(model) == 0
    assert "forward" not in model[1].__dict__
    assert unroute_single_rows(model) == 2
    assert not any("forward" in mod.__dict__ for mod in model.modules())


def test_bf16_cpu_model_is_routed_with_the_same_thoughts(tmp_path, monkeypatch):
    """A bf16 LatentModel on a CPU routes its linears; batch-1 thoughts and text match the unrouted model,
    and a float32 model is left alone."""
    from latent import load_model
    from latent.testing import tiny_model

    tiny_model("llama", tmp_path, hidden_size=96)
    m = load_model(str(tmp_path), dtype="bfloat16", device="cpu")
    routed = [mod for mod in m.model.modules() if "forward" in mod.__dict__]
    assert routed and all(type(mod) is nn.Linear for mod in routed)
    enc = m.encode(["Mia has 3 pencils and buys 4 more."])

    def run():
        st = m.prefill(**enc)
        th, st = m.think(st, 4)
        return th, m.generate(state=st, max_new_tokens=5).tokens

    calls = _counting_mv(monkeypatch)
    th, toks = run()
    assert calls, "latent steps of a bf16 batch-1 model must take the torch.mv path"
    assert unroute_single_rows(m.model) == len(routed)
    calls.clear()
    th_plain, toks_plain = run()
    assert not calls
    torch.testing.assert_close(th.float(), th_plain.float(), rtol=2e-2, atol=2e-2)
    assert torch.equal(toks, toks_plain)
    fp32 = load_model(str(tmp_path), device="cpu")
    assert not any("forward" in mod.__dict__ for mod in fp32.model.modules())
