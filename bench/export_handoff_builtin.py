"""Export a hand-off-trained built-in model as `builtin:<name>` (weights, tokenizer, card, model card,
loss curve). The card records the stages, their commands and wall times, and the solver accuracy on the
held-out arith problems (seed 2024, 2 x 256), as the other built-in cards do.

Run: python bench/export_handoff_builtin.py --model runs/handoff-v6b/model --name arith-mini-v6 \
        --stage runs/handoff-v6 runs/handoff-v6b
"""

from __future__ import annotations

import argparse
import json
import shutil
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

from latent.args import add_config_arguments, config_from_args, run_script

BUILTIN = Path(__file__).resolve().parents[1] / "latent" / "builtin_models"
KEEP = (
    "config.json",
    "model.safetensors",
    "generation_config.json",
    "tokenizer.json",
    "tokenizer_config.json",
)


def heldout_checks(config: dict) -> dict:
    """Recount what a stage trained on against what is evaluated: hand-off training items that hold a
    test-split value or name, arith problems with an evaluated problem's solution signature, and arith
    lines that add two hand-off test sum values (a sum test item's working line). All should be 0.
    Configs saved before an option existed load with its default (off)."""
    import re

    from eval import tasks_handoff as th
    from eval.arith_data import eval_signatures, solution_signature
    from finetune.train_handoff import HandoffTrainConfig, arith_stream, train_items

    cfg = HandoffTrainConfig(**config)
    test_vals, test_sum = set(th.values("test")), set(th.values("test", 10, 49))
    name_re = re.compile(r"\b(" + "|".join(th.TEST_NAMES) + r")\b")
    items = bad_items = 0
    for step in range(cfg.steps):
        level = cfg.levels[step % len(cfg.levels)]
        for it in train_items(cfg, level, step):
            items += 1
            text = " ".join(it.shares) + " " + it.question
            vals = {int(x) for x in re.findall(r"\d+", " ".join(it.shares))}
            bad_items += bool(vals & test_vals or name_re.search(text))
    arith = arith_stream(cfg)
    banned = eval_signatures()
    sigs = [solution_signature(p) for p in arith]
    return {
        "handoff_train_items": items,
        "handoff_train_items_with_a_test_value_or_name": bad_items,
        "arith_problems": len(arith),
        "arith_with_an_evaluated_signature": sum(sg in banned for sg in sigs),
        "arith_adding_two_test_sum_values": sum(
            any(op == "+" and a in test_sum and b in test_sum for a, op, b, _ in sg) for sg in sigs
        ),
    }


def stage_line(stage: dict) -> str:
    """One stage of the model card: steps, time, the loss terms, and the options that were on."""
    c = stage["config"]
    line = (
        f"  - {stage['log'][-1]['step']} steps, {stage['wall_s'] / 60:.1f} min, levels {c['levels']}, seed "
        f"{c['seed']}: text hand-off first, then latent batches (k = {c['k_schedule']}), oracle batches, "
        f"anti-shortcut weight {c['anti_weight']}, thought-note weight {c.get('note_weight', 0)}"
    )
    extra = [
        f"{c['kv_frac']:.0%} of latent batches on kv edges" if c.get("kv_frac") else "",
        f"working shown on {c['working_levels']}" if c.get("working_levels") else "",
        "relevance notes" if c.get("relevance_notes") else "",
        f"{c['random_names']:.0%} made-up names" if c.get("random_names") else "",
        "arith without test sums" if c.get("arith_skip_test_sums") else "",
    ]
    line += "".join(f"; {x}" for x in extra if x)
    return line + (f" ({stage['note']})" if stage.get("note") else "")


def plot(stages: list[dict], path: Path) -> None:
    from latent.plotting import figure, save_figure

    fig, ax = figure(figsize=(6, 3.5), dpi=100, extra="train")
    offset = 0
    for key, color in (("latent_ce", "tab:orange"), ("loss_text", "tab:blue"), ("note", "tab:green")):
        xs, ys, offset = [], [], 0
        for st in stages:
            for e in st["log"]:
                if key in e:
                    xs.append(offset + e["step"])
                    ys.append(e[key])
            offset += st["log"][-1]["step"] if st["log"] else 0
        if xs:
            ax.plot(xs, ys, color=color, label=key)
    ax.set_xlabel("optimizer step (stages in turn)")
    ax.set_ylabel("cross-entropy")
    ax.set_yscale("log")
    ax.legend()
    ax.grid(alpha=0.3)
    fig.tight_layout()
    save_figure(fig, path)


@dataclass
class ExportHandoffBuiltin:
    """Flags of the built-in model export."""

    model: str = field(metadata={"help": "trained model folder (the last stage's model/)"})
    name: str = field(metadata={"help": "built-in name to export as, e.g. arith-mini-v6"})
    stage: list[str] = field(metadata={"help": "training out_dirs, in order"})
    version: int = field(default=6, metadata={"help": "version written into the card"})
    base: str = field(
        default="builtin:arith-mini", metadata={"help": "the model the first stage started from"}
    )
    handoff_table: str | None = field(
        default=None, metadata={"help": "markdown file with the hand-off table to include"}
    )


def run(args: argparse.Namespace) -> int:
    a = config_from_args(ExportHandoffBuiltin, args)
    import torch
    import transformers

    from finetune.train_mas import solver_accuracy

    stages = [json.loads((Path(s) / "handoff_train.json").read_text()) for s in a.stage]
    out = BUILTIN / a.name
    out.mkdir(parents=True, exist_ok=True)
    for f in KEEP:
        shutil.copy(Path(a.model) / f, out / f)
    tmpl = Path(a.model) / "chat_template.jinja"
    if tmpl.is_file():
        shutil.copy(tmpl, out / tmpl.name)
    solver = solver_accuracy(str(out), seed=2024)
    plot(stages, out / "loss_curve.png")
    n_params = sum(
        t.numel() for t in __import__("safetensors.torch").torch.load_file(out / "model.safetensors").values()
    )
    wall = sum(s["wall_s"] for s in stages)
    steps = sum(s["log"][-1]["step"] for s in stages if s["log"])
    card = {
        "name": a.name,
        "version": a.version,
        "base": a.base,
        "params": n_params,
        "size_bytes": (out / "model.safetensors").stat().st_size,
        "heldout_accuracy": solver["acc"],
        "heldout_n": solver["n"],
        "heldout_steps": [2, 3],
        "heldout_accuracy_by_steps": solver["by_steps"],
        "heldout_eval": {"seed": 2024, "split": "heldout", "role": "solver"},
        "latent_steps": 4,
        "seed": stages[0]["config"]["seed"],
        "train_command": "; ".join(f"finetune.train_handoff.train({s['config']})" for s in stages),
        "stages": [
            {"config": s["config"], "wall_s": s["wall_s"], "steps": s["log"][-1]["step"]}
            | ({"note": s["note"]} if "note" in s else {})
            for s in stages
        ],
        "heldout_checks": [heldout_checks(s["config"]) for s in stages],
        "steps": steps,
        "tokens_seen": None,
        "wall_time_s": wall,
        "torch_threads": 1,
        "transformers_version": transformers.__version__,
        "torch_version": torch.__version__,
    }
    (out / "card.json").write_text(json.dumps(card, indent=2))
    table = Path(a.handoff_table).read_text() if a.handoff_table else "(see BENCHMARKS.md)"
    readme = f"""# builtin:{a.name} (version {a.version})

`{a.base}` fine-tuned on the hand-off task (`eval/tasks_handoff.py`, train split: names and
values disjoint from the test split) by `finetune/train_handoff.py`, in {len(stages)} stage{"s" if len(stages) > 1 else ""}, plus solver SFT on
train-split arith problems whose solution signature no evaluated problem has
(`eval.arith_data.signature_disjoint_train`). Earlier versions stay loadable under their names.

## Training
- Stages (seed, steps, wall time; 1 torch thread, fp32, a shared 2-core CPU):
{chr(10).join(stage_line(s) for s in stages)}
- Latent batches run `agents.final_agent_view` on `agents.handoff_graph(n, "latent")` over a
  `WorkingMemory(grad=True)`: the answerer reads only the holders' thoughts (on the kv-edge share of them,
  each holder's prompt as well); gradients go through every thought into the weights that produced them.
- Held-out recounts per stage (`card.json`, `heldout_checks`: hand-off training items holding a test value
  or name, arith problems with an evaluated signature, arith lines adding two test sum values):
  {"; ".join(f"{c['handoff_train_items_with_a_test_value_or_name']} of {c['handoff_train_items']} items, {c['arith_with_an_evaluated_signature']} and {c['arith_adding_two_test_sum_values']} of {c['arith_problems']} problems" for c in card["heldout_checks"])}.
- Held-out solver accuracy (seed 2024, 512 problems of 2-3 operations): **{solver["acc"]:.1%}**.

![loss curve](loss_curve.png)

## Hand-off (held-out test split)
{table}

## Limitations
- Only numbers of two digits handed on through notes of the shape the generator writes; trained with 4
  thoughts per holder.
"""
    (out / "README.md").write_text(readme)
    print(f"exported {out}: solver {solver['acc']:.1%}, {n_params} params")
    return 0


def main(argv: list[str] | None = None) -> int:
    return run_script(
        "bench/export_handoff_builtin.py",
        __doc__,
        partial(add_config_arguments, cls=ExportHandoffBuiltin),
        run,
        argv,
    )


if __name__ == "__main__":
    raise SystemExit(main())
