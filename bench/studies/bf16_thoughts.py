"""Where do bfloat16 latent thoughts part from float32, and from themselves at another batch size?

For each prompt: float32 thoughts at batch 1 are the reference. Then, per step, the relative L2 distance of
- bf16 batch 1 from the reference (dtype error),
- bf16 batch N from bf16 batch 1 (batch dependence), with the prompt left-padded among N - 1 others,
- the same with the CPU few-row bf16 routing off and the pad grouping off (are they the source?),
- bf16 running one forward over exactly float32's inputs (prompt and float32 thoughts): the error a single
  bf16 forward adds at each position, without any accumulation,
- float32 started from the reference state plus a relative perturbation of bf16's size (2^-8), which says
  how much the loop itself amplifies an error of that size, whatever produced it.
Step 0 is the prefill's last hidden state (before any thought): an error there entered in the forward
pass over the prompt, not in the loop.

Run: python bench/studies/bf16_thoughts.py --model qwen2.5-coder-0.5b-instruct --steps 10 --batch 16
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

from latent.args import add_config_arguments, config_from_args, run_script

# Word problems that are not in any evaluation set (written for this measurement).
PROMPTS = (
    "A baker makes 48 rolls and sells 3 bags of 9 rolls. How many rolls are left?",
    "Mia reads 12 pages a day for 5 days, then 20 pages. How many pages did she read?",
    "A tank holds 250 litres and leaks 15 litres an hour. How much is left after 6 hours?",
    "Sam buys 4 pens at 3 dollars and a book at 11 dollars. What does he spend?",
    "A class of 28 splits into teams of 4. How many teams are there?",
    "Lena saves 35 dollars a week. How many weeks until she has 280 dollars?",
    "A train travels 90 km an hour for 3 hours and 60 km an hour for 2 hours. How far does it go?",
    "There are 7 boxes of 24 eggs and 19 eggs break. How many eggs are whole?",
    "Noah is 3 times as old as his 8-year-old sister. How old will he be in 5 years?",
    "A farm has 16 cows and twice as many sheep. How many animals in all?",
    "A shop sells 125 apples on Monday and 40% more on Tuesday. How many on Tuesday?",
    "Ivy runs 2.5 km every morning. How far does she run in 2 weeks?",
    "A rope of 84 metres is cut into pieces of 7 metres. How many pieces?",
    "Omar had 300 stamps, gave away a third and bought 45. How many now?",
    "A cinema has 18 rows of 22 seats and 97 are empty. How many are taken?",
    "A recipe needs 3 eggs per cake. How many eggs for 13 cakes?",
)


@dataclass
class Options:
    """Distances of bfloat16 thoughts from float32 and across batch sizes, per latent step."""

    model: str = field(default="qwen2.5-coder-0.5b-instruct", metadata={"help": "model to load"})
    steps: int = field(default=10, metadata={"help": "latent thoughts per prompt"})
    batch: int = field(default=16, metadata={"help": "the larger batch size (<= 16)"})
    prompts: int = field(
        default=4, metadata={"help": "how many prompts are measured (each at batch 1 and N)"}
    )
    threads: int = field(default=1, metadata={"help": "torch CPU threads"})
    out: str = field(default="bench/results/bf16_thoughts", metadata={"help": "report folder"})


def _rel(a, b) -> list[float]:
    """Per-step relative L2 distance of (k, D) rows, in float64."""
    a, b = a.double(), b.double()
    return [float((x - y).norm() / y.norm().clamp_min(1e-30)) for x, y in zip(a, b)]


def _trace(model, rows: list[str], steps: int, which: int, perturb: float = 0.0, seed: int = 0):
    """[last hidden after prefill] + the thoughts (k, D) of row `which` of a batch of `rows`."""
    import torch

    st = model.prefill(**model.encode(rows, chat=True))
    if perturb:
        g = torch.Generator().manual_seed(seed)
        noise = torch.randn(st.last_hidden.shape, generator=g, dtype=torch.float32)
        h = st.last_hidden.float()
        st.last_hidden = (
            h + perturb * h.norm(dim=-1, keepdim=True) * noise / noise.norm(dim=-1, keepdim=True)
        ).to(st.last_hidden.dtype)
    first = st.last_hidden[which].float()[None]
    thoughts, _ = model.think(st, steps)
    return torch.cat([first, thoughts[which].float()], 0)


def _teacher_forced(model, ref_model, prompt: str, ref_thoughts) -> list[float]:
    """Per position: one `model` forward over the prompt and the float32 thoughts (all inputs equal), its
    realigned last hidden states against float32's. The error one forward adds, without accumulation."""
    import torch

    ids = ref_model.encode([prompt], chat=True)["input_ids"]
    found = []
    for m in (model, ref_model):
        embeds = torch.cat([m.embed(ids), ref_thoughts[None, 1:].to(m.dtype)], 1)
        with torch.no_grad():
            h = m.model(inputs_embeds=embeds, output_hidden_states=True).hidden_states[-1][0]
        steps = ref_thoughts.shape[0] - 1
        found.append(torch.cat([h[-steps - 1 : -steps].float(), ref_model.aligner(h[-steps:].float())], 0))
    return _rel(found[0], found[1])


def _batch_for(i: int, n: int) -> list[str]:
    others = [p for j, p in enumerate(PROMPTS) if j != i]
    return [*others[: n - 1], PROMPTS[i]]  # the measured prompt last: the longest rows are not it


def measure(opts: Options) -> dict:
    import torch

    from latent import load_model
    from latent.cpu_gemv import unroute_few_rows

    torch.set_num_threads(opts.threads)
    ref_model = load_model(opts.model, dtype="float32")
    cases: dict[str, list[list[float]]] = {}
    refs = {i: _trace(ref_model, [PROMPTS[i]], opts.steps, 0) for i in range(opts.prompts)}
    for i in range(opts.prompts):
        pert = _trace(ref_model, [PROMPTS[i]], opts.steps, 0, perturb=2.0**-8, seed=i)
        cases.setdefault("float32, start perturbed by 2^-8 vs float32", []).append(_rel(pert, refs[i]))
    fp32_batch = {i: _trace(ref_model, _batch_for(i, opts.batch), opts.steps, opts.batch - 1) for i in refs}
    for i in refs:
        cases.setdefault(f"float32 batch {opts.batch} vs batch 1", []).append(_rel(fp32_batch[i], refs[i]))
    bf = load_model(opts.model, dtype="bfloat16")
    for i in refs:
        cases.setdefault("bf16 one forward over float32's inputs vs float32", []).append(
            _teacher_forced(bf, ref_model, PROMPTS[i], refs[i])
        )
    del ref_model
    for label, routed, grouped in (
        ("", True, True),
        (", routing off", False, True),
        (", routing and grouping off", False, False),
    ):
        if not routed:
            unroute_few_rows(bf._hf)
        bf.group_pads = grouped
        for i in refs:
            one = _trace(bf, [PROMPTS[i]], opts.steps, 0)
            many = _trace(bf, _batch_for(i, opts.batch), opts.steps, opts.batch - 1)
            cases.setdefault(f"bf16 batch 1 vs float32{label}", []).append(_rel(one, refs[i]))
            cases.setdefault(f"bf16 batch {opts.batch} vs bf16 batch 1{label}", []).append(_rel(many, one))
    return {"cases": cases}


def _table(cases: dict[str, list[list[float]]]) -> str:
    import statistics

    steps = len(next(iter(cases.values()))[0])
    head = "| comparison | " + " | ".join(["prefill"] + [f"step {k}" for k in range(1, steps)]) + " |"
    lines = [head, "|" + "---|" * (steps + 1)]
    for name, rows in cases.items():
        med = [statistics.median(r[k] for r in rows) for k in range(steps)]
        lines.append(f"| {name} | " + " | ".join(f"{v:.2g}" for v in med) + " |")
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    opts = config_from_args(Options, args)
    t0 = time.perf_counter()
    found = measure(opts)
    table = _table(found["cases"])
    print(table)
    out = Path(opts.out)
    out.mkdir(parents=True, exist_ok=True)
    meta = {"options": vars(opts), "seconds": round(time.perf_counter() - t0, 1)}
    (out / "report.json").write_text(json.dumps(meta | found, indent=1) + "\n")
    (out / "report.md").write_text(
        f"# bf16 thoughts against float32 ({opts.model})\n\nMedian over {opts.prompts} prompts of the relative "
        f"L2 distance at each step (step 0: the prefill's last hidden state).\n\n{table}\n\n"
        f"Command: `python bench/studies/bf16_thoughts.py --model {opts.model} --steps {opts.steps} --batch {opts.batch} "
        f"--prompts {opts.prompts}`\n"
    )
    return 0


def main(argv: list[str] | None = None) -> int:
    return run_script(
        "bench/studies/bf16_thoughts.py", __doc__, partial(add_config_arguments, cls=Options), run, argv
    )


if __name__ == "__main__":
    raise SystemExit(main())
