"""bfloat16 batch-1 latent loop and decode on a CPU with and without the single-row `torch.mv` path
(`latent.cpu_gemv`).

    python bench/single_row_gemv.py --model smollm2-135m-instruct --repeats 6

A bf16 `LatentModel` on a CPU computes single rows (latent steps, batch-1 decoding) with `torch.mv`,
which is faster there than the oneDNN matmul behind `F.linear`. Both settings run interleaved in one
process on the same rg:gsm_symbolic planner prompt: the prompt read, k latent steps, then a greedy
decode; thoughts and tokens of the two are compared. A microbenchmark first times one row through
matrices of the model's decoder-layer shapes (random weights): `F.linear` in float32 and bfloat16,
`torch.mv` in bfloat16.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from latent.args import add_config_arguments, config_from_args, run_script  # noqa: E402


@dataclass
class SingleRowGemvBench:
    """Flags of the single-row matmul timing."""

    model: str = field(default="smollm2-135m-instruct", metadata={"help": "load_model name or path"})
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


def matmul_ms(weights: list, use_mv: bool, repeats: int) -> float:
    """Median milliseconds for one row through every matrix in `weights`."""
    import torch
    import torch.nn.functional as F

    rows = {w.shape[1]: torch.randn(1, w.shape[1], dtype=w.dtype) for w in weights}

    def once() -> None:
        for w in weights:
            x = rows[w.shape[1]]
            torch.mv(w, x[0]) if use_mv else F.linear(x, w)

    once()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        once()
        times.append(time.perf_counter() - t0)
    return 1000 * statistics.median(times)


def run(ns: argparse.Namespace) -> int:
    args = config_from_args(SingleRowGemvBench, ns)
    import torch

    torch.set_num_threads(args.threads)
    from agents.prompts import PromptSet
    from eval.tasks import load_task
    from latent import load_model
    from latent.cpu_gemv import route_single_rows, unroute_single_rows
    from latent.memory import WorkingMemory

    m = load_model(args.model, dtype=torch.bfloat16)
    if m.device.type != "cpu":
        print("single_row_gemv: skipped: the single-row path is for CPUs only", file=sys.stderr)
        return 2
    text = m.config.get_text_config(decoder=True)
    w32, w16 = layer_matrices(text, torch.float32), layer_matrices(text, torch.bfloat16)
    print(f"one row through the {len(w32)} decoder-layer matrices (random weights of the model's shapes):")
    print(
        f"F.linear float32 {matmul_ms(w32, False, args.repeats):.1f} ms, F.linear bfloat16 "
        f"{matmul_ms(w16, False, args.repeats):.1f} ms, torch.mv bfloat16 {matmul_ms(w16, True, args.repeats):.1f} ms\n"
    )
    del w32, w16
    item = load_task("rg:gsm_symbolic", limit=1).items[0]
    enc = m.encode([PromptSet.load("default").messages("planner", item.question)])

    def one(routed: bool) -> dict:
        (route_single_rows if routed else unroute_single_rows)(m.model)
        mem = WorkingMemory(m)
        t0 = time.perf_counter()
        st, pid = mem.write_tokens("planner", "prompt", enc["input_ids"], enc["attention_mask"], None, [])
        st, lid = mem.write_latent("planner", st, args.steps, [pid], owned=True)
        t1 = time.perf_counter()
        g = m.generate(state=st, max_new_tokens=args.new_tokens, eos_token_id=[])  # every token decoded
        t2 = time.perf_counter()
        return {"loop": t1 - t0, "decode": t2 - t1, "thoughts": mem.segments[lid].embeds, "tokens": g.tokens}

    one(True), one(False)
    runs: dict[bool, list[dict]] = {True: [], False: []}
    for r in range(args.repeats):
        for routed in (True, False) if r % 2 == 0 else (False, True):
            runs[routed].append(one(routed))
    route_single_rows(m.model)
    a, b = runs[True][-1], runs[False][-1]
    diff = float(
        ((a["thoughts"] - b["thoughts"]).float().norm(dim=-1) / b["thoughts"].float().norm(dim=-1)).max()
    )
    print(
        f"{args.model}, bfloat16, batch 1 ({enc['input_ids'].shape[1]} prompt tokens), {args.steps} latent steps, "
        f"{args.new_tokens} decoded tokens, {args.threads} thread(s), {args.repeats} interleaved repeats"
    )
    print(f"{'part':<28} | {'F.linear s':>10} | {'torch.mv s':>10} | {'F.linear / torch.mv':>19} | range")
    for part, label in (("loop", "prompt read + latent steps"), ("decode", "decode")):
        ratios = [y[part] / x[part] for x, y in zip(runs[True], runs[False])]
        print(
            f"{label:<28} | {statistics.median(y[part] for y in runs[False]):>10.3f} | "
            f"{statistics.median(x[part] for x in runs[True]):>10.3f} | {statistics.median(ratios):>19.2f} | "
            f"{min(ratios):.2f}-{max(ratios):.2f}"
        )
    same = torch.equal(a["tokens"], b["tokens"])
    print(f"thought max rel diff {diff:.1e}; decoded tokens identical: {same}")
    return 0


def main(argv: list[str] | None = None) -> int:
    return run_script(
        "bench/single_row_gemv.py", __doc__, partial(add_config_arguments, cls=SingleRowGemvBench), run, argv
    )


if __name__ == "__main__":
    raise SystemExit(main())
