"""bfloat16 latent loop and decode on a CPU with and without the few-row matmul path (`latent.cpu_gemv`).

    python bench/speed/few_row_matmul.py --model smollm2-135m-instruct --batches 1,16 --repeats 6

A bf16 `LatentModel` on a CPU with AMX computes up to `FEW_ROWS` rows (latent steps, decoding) as
`W @ x^T` (one row: `torch.mv`), which is faster there than the oneDNN matmul behind `F.linear(x, W)`;
elsewhere it runs `F.linear` (`latent.cpu_gemv.few_rows_pay`, a CPU-feature rule). This bench runs
both paths whatever the rule says, and our float32 model beside them, interleaved in one process on
the same rg:gsm_symbolic planner prompts: the prompt read, k latent steps, then a greedy decode; the
bf16 thoughts and tokens of the two paths are compared bitwise. A microbenchmark first times the rows
through matrices of the model's decoder-layer shapes (random weights): `F.linear` in float32 and
bfloat16, the routed path in bfloat16. The header names the CPU flags the rule reads and its choice.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from latent.args import add_config_arguments, config_from_args, run_script  # noqa: E402


@dataclass
class FewRowMatmulBench:
    """Flags of the few-row matmul timing."""

    model: str = field(default="smollm2-135m-instruct", metadata={"help": "load_model name or path"})
    batches: str = field(default="1,16", metadata={"help": "comma-separated batch sizes (rows per step)"})
    steps: int = field(default=8, metadata={"help": "latent steps after the prompt read"})
    new_tokens: int = field(default=32, metadata={"help": "greedy tokens decoded after the thoughts"})
    repeats: int = field(default=6, metadata={"help": "interleaved timings per setting"})
    threads: int = field(default=1, metadata={"help": "torch CPU threads"})


def layer_matrices(config, dtype) -> list:
    """Random weights of every decoder layer's seven projections (q, k, v, o, gate, up, down)."""
    import torch

    d, f = config.hidden_size, config.intermediate_size
    hd = getattr(config, "head_dim", None) or d // config.num_attention_heads
    q, kv = config.num_attention_heads * hd, config.num_key_value_heads * hd
    shapes = [(q, d), (kv, d), (kv, d), (d, q), (f, d), (f, d), (d, f)]
    return [torch.randn(o, i, dtype=dtype) for _ in range(config.num_hidden_layers) for o, i in shapes]


def _linears(weights: list) -> list:
    """`nn.Linear` layers (no bias, frozen) holding `weights`."""
    from torch import nn

    layers = []
    for w in weights:
        layer = nn.Linear(w.shape[1], w.shape[0], bias=False, dtype=w.dtype)
        layer.weight = nn.Parameter(w, requires_grad=False)
        layers.append(layer)
    return layers


def routed_equals_linear(weights: list, rows: int) -> bool:
    """Whether the routed path's products of `rows` random rows equal `F.linear`'s bitwise."""
    import torch
    import torch.nn.functional as F

    from latent.cpu_gemv import few_row_linear

    def same(lay) -> bool:
        x = torch.randn(rows, lay.in_features, dtype=lay.weight.dtype)
        return torch.equal(few_row_linear(lay, x), F.linear(x, lay.weight))

    return all(same(lay) for lay in _linears(weights))


def matmul_ms(weights: list, rows: int, routed: bool, repeats: int) -> float:
    """Median milliseconds for `rows` rows through every matrix in `weights`."""
    import torch
    import torch.nn.functional as F

    from latent.cpu_gemv import few_row_linear

    xs = {w.shape[1]: torch.randn(rows, w.shape[1], dtype=w.dtype) for w in weights}
    layers = _linears(weights)

    def once() -> None:
        for lay in layers:
            x = xs[lay.in_features]
            few_row_linear(lay, x) if routed else F.linear(x, lay.weight)

    once()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        once()
        times.append(time.perf_counter() - t0)
    return 1000 * statistics.median(times)


def _median(runs: dict, part: str, key: bool | None) -> float:
    return statistics.median(x[part] for x in runs[key])


def _ratio(runs: dict, part: str, num: bool | None, den: bool | None) -> float:
    """Median over repetitions of `num`'s time / `den`'s time (pairs timed in the same repetition)."""
    return statistics.median(x[part] / y[part] for x, y in zip(runs[num], runs[den]))


def run(ns: argparse.Namespace) -> int:
    args = config_from_args(FewRowMatmulBench, ns)
    import torch

    torch.set_num_threads(args.threads)
    from agents.prompts import PromptSet, plain_prompt
    from eval.tasks import load_task
    from latent import load_model
    from latent.cpu_gemv import FEW_ROWS, cpu_flags, few_rows_pay, route_few_rows, unroute_few_rows
    from latent.memory import WorkingMemory

    batches = [int(b) for b in args.batches.split(",")]
    if any(b < 1 or b > FEW_ROWS for b in batches):
        print(
            f"few_row_matmul: --batches must lie in 1..{FEW_ROWS} (the routed range), got {args.batches}",
            file=sys.stderr,
        )
        return 2
    m = load_model(args.model, dtype=torch.bfloat16)
    if m.device.type != "cpu":
        print("few_row_matmul: skipped: the few-row path is for CPUs only", file=sys.stderr)
        return 2
    flags = cpu_flags()
    has = ", ".join(f"{f} {'yes' if f in flags else 'no'}" for f in ("avx512_bf16", "amx_bf16"))
    print(f"CPU flags: {has}; the rule (few_rows_pay) picks {'routed' if few_rows_pay() else 'F.linear'}")
    m32 = load_model(args.model, dtype=torch.float32)
    text = m.config.get_text_config(decoder=True)
    with torch.no_grad():
        w32, w16 = layer_matrices(text, torch.float32), layer_matrices(text, torch.bfloat16)
        print(f"rows through the {len(w32)} decoder-layer matrices (random weights of the model's shapes):")
        for b in batches:
            f32 = matmul_ms(w32, b, False, args.repeats)
            f16 = matmul_ms(w16, b, False, args.repeats)
            r16 = matmul_ms(w16, b, True, args.repeats)
            same = routed_equals_linear(w16, b)
            print(
                f"{b:>2} row(s): F.linear float32 {f32:.1f} ms, F.linear bfloat16 {f16:.1f} ms, routed "
                f"bfloat16 {r16:.1f} ms; routed products equal F.linear's bitwise: {same}"
            )
    del w32, w16
    items = load_task("rg:gsm_symbolic", limit=max(batches)).items
    prompts = PromptSet.load("default")
    print(
        f"\n{args.model}, bfloat16, {args.steps} latent steps, {args.new_tokens} decoded tokens, "
        f"{args.threads} thread(s), {args.repeats} interleaved repeats; float32: our float32 model"
    )
    print(
        f"{'batch':>5} | {'part':<26} | {'F.linear s':>10} | {'routed s':>8} | {'F.linear / routed':>17} | "
        f"{'range':>9} | {'float32 s':>9} | {'float32 / F.linear':>18} | {'float32 / routed':>16}"
    )
    for b in batches:
        msgs = [prompts.messages("planner", it.question) for it in items[:b]]
        if m.tokenizer.chat_template is None:  # a base checkpoint (gemma-3-270m)
            enc = m.encode([plain_prompt(ms) for ms in msgs], add_special_tokens=True)
        else:
            enc = m.encode(msgs)

        def one(routed: bool | None, enc=enc) -> dict:
            """One timed run: bf16 routed (True), bf16 `F.linear` (False) or our float32 model (None)."""
            model = m32 if routed is None else m
            if routed is not None:
                (route_few_rows if routed else unroute_few_rows)(m.model)
            mem = WorkingMemory(model)
            t0 = time.perf_counter()
            st, pid = mem.write_tokens("planner", "prompt", enc["input_ids"], enc["attention_mask"], None, [])
            st, lid = mem.write_latent("planner", st, args.steps, [pid], owned=True)
            t1 = time.perf_counter()
            g = model.generate(state=st, max_new_tokens=args.new_tokens, eos_token_id=[])  # all decoded
            t2 = time.perf_counter()
            return {
                "loop": t1 - t0,
                "decode": t2 - t1,
                "thoughts": mem.segments[lid].embeds,
                "tokens": g.tokens,
            }

        one(True), one(False), one(None)
        runs: dict[bool | None, list[dict]] = {True: [], False: [], None: []}
        for r in range(args.repeats):
            for routed in (True, False, None) if r % 2 == 0 else (None, False, True):
                runs[routed].append(one(routed))
        (route_few_rows if few_rows_pay() else unroute_few_rows)(m.model)  # back to what the rule picks
        a, c = runs[True][-1], runs[False][-1]
        for part, label in (("loop", "prompt read + latent steps"), ("decode", "decode")):
            med = partial(_median, runs, part)
            ratio = partial(_ratio, runs, part)
            ratios = [y[part] / x[part] for x, y in zip(runs[True], runs[False])]
            print(
                f"{b:>5} | {label:<26} | {med(False):>10.3f} | {med(True):>8.3f} | {statistics.median(ratios):>17.2f} | "
                f"{min(ratios):.2f}-{max(ratios):.2f} | {med(None):>9.3f} | {ratio(None, False):>18.2f} | "
                f"{ratio(None, True):>16.2f}"
            )
        print(
            f"{b:>5} | thoughts bitwise equal: {torch.equal(a['thoughts'], c['thoughts'])}; decoded tokens "
            f"identical: {torch.equal(a['tokens'], c['tokens'])}"
        )
    return 0


def main(argv: list[str] | None = None) -> int:
    return run_script(
        "bench/speed/few_row_matmul.py",
        __doc__,
        partial(add_config_arguments, cls=FewRowMatmulBench),
        run,
        argv,
    )


if __name__ == "__main__":
    raise SystemExit(main())
