"""Few bf16 rows as `W @ x^T` (`latent.cpu_gemv`): the same numbers as `F.linear`, taken only for up to
`FEW_ROWS` bf16 CPU rows without autograd, and routed on bf16 CPU models of AMX CPUs only."""

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from latent import cpu_gemv
from latent.cpu_gemv import (
    FEW_ROWS,
    cpu_flags,
    few_row_linear,
    few_rows_pay,
    route_few_rows,
    unroute_few_rows,
)

AMX_XEON = frozenset("avx512f avx512_bf16 amx_bf16 amx_tile amx_int8".split())
EPYC = frozenset("avx512f avx512_bf16 avx512_vnni".split())  # bf16 in AVX-512, no AMX


def _counting(monkeypatch, name: str) -> list[int]:
    calls = []
    real = getattr(torch, name)

    def counted(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(torch, name, counted)
    return calls


def _linear_rows(monkeypatch) -> list[int]:
    """Rows of every `F.linear` call from here on."""
    rows = []
    real = F.linear

    def counted(x, w, b=None):
        rows.append(x.numel() // x.shape[-1])
        return real(x, w, b)

    monkeypatch.setattr(F, "linear", counted)
    return rows


@pytest.mark.parametrize("shape", [(37,), (1, 37), (1, 1, 37)])
@pytest.mark.parametrize("bias", [True, False])
def test_single_row_takes_mv_and_equals_linear(shape, bias, monkeypatch):
    calls = _counting(monkeypatch, "mv")
    layer = nn.Linear(37, 23, bias=bias).to(torch.bfloat16)
    x = torch.randn(shape, dtype=torch.bfloat16)
    with torch.no_grad():
        got = few_row_linear(layer, x)
        want = F.linear(x, layer.weight, layer.bias)
    assert calls, "a single bf16 row must take the torch.mv path"
    assert got.shape == want.shape == (*shape[:-1], 23)
    torch.testing.assert_close(got.float(), want.float(), rtol=1e-2, atol=1e-2)


@pytest.mark.parametrize("shape", [(2, 64), (4, 3, 64), (FEW_ROWS, 1, 64)])
@pytest.mark.parametrize("bias", [True, False])
def test_few_rows_equal_linear_and_come_back_contiguous(shape, bias, monkeypatch):
    """2..FEW_ROWS rows: W @ x^T, contiguous (a transposed result makes later norms round differently)."""
    calls = _counting(monkeypatch, "mv")
    linear = _linear_rows(monkeypatch)
    layer = nn.Linear(64, 48, bias=bias).to(torch.bfloat16)
    x = torch.randn(shape, dtype=torch.bfloat16)
    with torch.no_grad():
        got = few_row_linear(layer, x)
        assert not calls and not linear, "2..FEW_ROWS bf16 rows must take the W @ x^T path"
        want = F.linear(x, layer.weight, layer.bias)
    assert got.shape == want.shape and got.is_contiguous()
    torch.testing.assert_close(got.float(), want.float(), rtol=1e-2, atol=1e-2)


@pytest.mark.parametrize(
    "dtype, rows, grad",
    [
        (torch.float32, 1, False),
        (torch.float32, 4, False),
        (torch.bfloat16, FEW_ROWS + 1, False),
        (torch.bfloat16, 1, True),
        (torch.bfloat16, 4, True),
    ],
)
def test_other_inputs_keep_linear(dtype, rows, grad, monkeypatch):
    real = F.linear
    seen = _linear_rows(monkeypatch)
    layer = nn.Linear(16, 8).to(dtype)
    x = torch.randn(rows, 16, dtype=dtype, requires_grad=grad)
    with torch.enable_grad() if grad else torch.no_grad():
        out = few_row_linear(layer, x)
    assert seen == [rows], "inputs outside the few-row path must run F.linear"
    assert torch.equal(out, real(x, layer.weight, layer.bias))
    if grad:
        out.float().sum().backward()
        assert x.grad is not None and layer.weight.grad is not None


def test_route_skips_subclasses_and_is_idempotent():
    class Custom(nn.Linear):
        pass

    model = nn.Sequential(nn.Linear(4, 4), Custom(4, 4), nn.Sequential(nn.Linear(4, 2)))
    assert route_few_rows(model) == 2
    assert route_few_rows(model) == 0
    assert "forward" not in model[1].__dict__
    assert unroute_few_rows(model) == 2
    assert not any("forward" in mod.__dict__ for mod in model.modules())


def test_cpu_flags_reads_the_flags_line_and_is_empty_without_cpuinfo(tmp_path):
    """The flags come from /proc/cpuinfo's `flags` line; no such file (another OS) means no flags."""
    info = tmp_path / "cpuinfo"
    info.write_text("processor\t: 0\nmodel name\t: AMD EPYC\nflags\t\t: fpu avx512f avx512_bf16\n\n")
    assert cpu_flags.__wrapped__(str(info)) == {"fpu", "avx512f", "avx512_bf16"}
    assert cpu_flags.__wrapped__(str(tmp_path / "missing")) == frozenset()


@pytest.mark.parametrize("flags, routed", [(AMX_XEON, True), (EPYC, False), (frozenset(), False)])
def test_few_rows_pay_only_with_amx(flags, routed, monkeypatch):
    """The rule: route with `amx_bf16`; avx512_bf16 alone (AMD EPYC) or unknown flags keep `F.linear`."""
    monkeypatch.setattr(cpu_gemv, "cpu_flags", lambda: flags)
    assert few_rows_pay() is routed


@pytest.mark.parametrize("flags", [EPYC, frozenset()])
def test_bf16_model_without_amx_keeps_linear(flags, tmp_path, monkeypatch):
    """A bf16 CPU model on a CPU without AMX runs plain `F.linear`: no linear is routed."""
    from latent import load_model
    from latent.testing import tiny_model

    monkeypatch.setattr(cpu_gemv, "cpu_flags", lambda: flags)
    tiny_model("llama", tmp_path, hidden_size=96)
    m = load_model(str(tmp_path), dtype="bfloat16", device="cpu")
    assert not any("forward" in mod.__dict__ for mod in m.model.modules())


@pytest.mark.parametrize("batch", [1, 3])
def test_bf16_cpu_model_is_routed_with_the_same_thoughts(batch, tmp_path, monkeypatch):
    """A bf16 LatentModel on an AMX CPU routes its linears; thoughts and text match the unrouted model at batch 1
    (torch.mv) and at a padded batch of 3 (W @ x^T), and a float32 model is left alone."""
    from latent import load_model
    from latent.testing import tiny_model

    monkeypatch.setattr(cpu_gemv, "cpu_flags", lambda: AMX_XEON)  # the rule routes on AMX CPUs
    tiny_model("llama", tmp_path, hidden_size=96)
    m = load_model(str(tmp_path), dtype="bfloat16", device="cpu")
    routed = [mod for mod in m.model.modules() if "forward" in mod.__dict__]
    assert routed and all(type(mod) is nn.Linear for mod in routed)
    texts = ["Mia has 3 pencils and buys 4 more.", "Tom reads.", "Sam walks 2 dogs and then 5 cats home."]
    enc = m.encode(texts[:batch])

    def run():
        st = m.prefill(**enc)
        th, st = m.think(st, 4)
        return th, m.generate(state=st, max_new_tokens=5).tokens

    linear = _linear_rows(monkeypatch)
    th, toks = run()
    assert all(n > FEW_ROWS for n in linear), f"latent steps at batch {batch} must not run F.linear"
    assert unroute_few_rows(m.model) == len(routed)
    linear.clear()
    th_plain, toks_plain = run()
    assert batch in linear
    torch.testing.assert_close(th.float(), th_plain.float(), rtol=2e-2, atol=2e-2)
    assert torch.equal(toks, toks_plain)
    fp32 = load_model(str(tmp_path), device="cpu")
    assert not any("forward" in mod.__dict__ for mod in fp32.model.modules())
