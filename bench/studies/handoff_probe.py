"""Where does the latent hand-off lose the number: in the holders' thoughts (writer) or in the answerer
reading them (reader)?

Runs latent_only (latent edges: the answerer reads the holders' thought KV only) on held-out hand-off
items with the logit lens on (`inspect_latents`), and reads each holder's thoughts through the output
head. Per item: do the top-1 tokens of the thoughts spell the holder's number (digit j at thought j, as
the trained note "53 Sara" puts it; or anywhere in the thoughts), and does the answer equal the asked
number, or the number the thoughts spell?

Run: python bench/studies/handoff_probe.py --model builtin:arith-mini-v6 --level relay --limit 100
"""

from __future__ import annotations

import argparse
import json
import re
from dataclasses import dataclass, field
from functools import partial

from eval.report import wilson
from eval.tasks import handoff as th
from latent.args import UsageError, add_config_arguments, config_from_args, run_script


def number_of(share: str) -> str:
    nums = re.findall(r"\d+", share)
    return nums[-1] if nums else ""


def answer_number(text: str) -> str | None:
    """The number in the answer's \\boxed{}, else its last number."""
    boxed = re.findall(r"\\boxed\{\s*(-?\d+)", text)
    nums = boxed or re.findall(r"-?\d+", text)
    return nums[-1] if nums else None


def spelled(tokens: list[str]) -> str:
    """The digits the thoughts' top-1 tokens spell, from the first thought on (stops at a non-digit)."""
    out = ""
    for t in tokens:
        t = t.strip()
        if not t.isdigit():
            break
        out += t
    return out


def probe_item(item: th.HandoffItem, result) -> dict:
    holders = result.agents[:-1]
    asked = item.answer
    rows = []
    for share, h in zip(item.shares, holders):
        lens = h.latent_tokens or []
        top1 = [pos[0][0] for pos in lens]
        num = number_of(share)
        digits = list(num)
        rows.append(
            {
                "number": num,
                "top1": top1,
                "top1_p": [round(pos[0][1], 3) for pos in lens],
                "prefix": spelled(top1),
                "digit_ok": [j < len(top1) and top1[j].strip() == d for j, d in enumerate(digits)],
                "in_top5": all(
                    j < len(lens) and any(t.strip() == d for t, _ in lens[j]) for j, d in enumerate(digits)
                ),
                "anywhere": num in "".join(t.strip() for t in top1),
            }
        )
    ans = answer_number(result.text)
    asked_h = next((r for r in rows if r["number"] == asked), rows[0])
    return {
        "id": item.id,
        "asked": asked,
        "answer": ans,
        "answer_text": result.text,
        "correct": ans == asked,
        "holders": rows,
        "writer_ok": asked_h["prefix"] == asked,
        "answer_is_spelled": ans is not None and ans == asked_h["prefix"],
        "answer_is_other_holder": ans is not None
        and any(r["number"] == ans for r in rows if r is not asked_h),
    }


def first_ok(rec: dict, j: int) -> bool:
    """Digit j of the answer equals digit j of the asked number."""
    a, want = rec["answer"] or "", rec["asked"]
    return len(a) > j and len(want) > j and a[j] == want[j]


def rate(n: int, d: int) -> str:
    if d == 0:
        return "-"
    lo, hi = wilson(n, d)
    return f"{n}/{d} ({100 * n / d:.0f}%, {100 * lo:.0f}-{100 * hi:.0f}%)"


def table(recs: list[dict]) -> str:
    n = len(recs)
    hs = [h for r in recs for h in r["holders"]]
    w = [r for r in recs if r["writer_ok"]]
    nw = [r for r in recs if not r["writer_ok"]]
    lines = [
        "| measure | count (%, Wilson 95% CI) |",
        "|---|---:|",
        f"| answer correct (latent_only) | {rate(sum(r['correct'] for r in recs), n)} |",
        f"| holder thoughts: digit 1 top-1 = share's first digit | {rate(sum(h['digit_ok'][0] for h in hs), len(hs))} |",
        f"| holder thoughts: digit 2 top-1 = share's second digit | {rate(sum(len(h['digit_ok']) > 1 and h['digit_ok'][1] for h in hs), len(hs))} |",
        f"| holder thoughts spell the share's number from thought 1 | {rate(sum(h['prefix'] == h['number'] for h in hs), len(hs))} |",
        f"| ... number's digits in top-5 at thoughts 1..2 | {rate(sum(h['in_top5'] for h in hs), len(hs))} |",
        f"| ... number anywhere in the top-1 tokens | {rate(sum(h['anywhere'] for h in hs), len(hs))} |",
        f"| asked holder spells the asked number (writer ok) | {rate(len(w), n)} |",
        f"| correct when writer ok | {rate(sum(r['correct'] for r in w), len(w))} |",
        f"| correct when writer not ok | {rate(sum(r['correct'] for r in nw), len(nw))} |",
        f"| answer's first digit = asked number's first digit | {rate(sum(first_ok(r, 0) for r in recs), n)} |",
        f"| answer's second digit = asked number's second digit | {rate(sum(first_ok(r, 1) for r in recs), n)} |",
        f"| answer = number the asked holder's thoughts spell | {rate(sum(r['answer_is_spelled'] for r in recs), n)} |",
        f"| answer = the other holder's number | {rate(sum(r['answer_is_other_holder'] for r in recs), n)} |",
        f"| answer has no number | {rate(sum(r['answer'] is None for r in recs), n)} |",
    ]
    return "\n".join(lines)


@dataclass
class HandoffProbe:
    """Flags of the thought probe."""

    model: str = field(default="builtin:arith-mini-v6", metadata={"help": "load_model name or path"})
    data: str | None = field(
        default=None, metadata={"help": "hand-off JSONL file in the schema (eval/tasks/handoff.py)"}
    )
    level: str | None = field(
        default=None,
        metadata={
            "help": "generated items of this level instead of --data (default: relay)",
            "choices": th.LEVELS,
        },
    )
    limit: int = field(default=100, metadata={"help": "items"})
    seed: int = field(default=0, metadata={"help": "seed of the generated items"})
    latent_steps: int = field(default=4, metadata={"help": "thoughts per holder"})
    max_new_tokens: int = field(default=24, metadata={"help": "decode budget of the final agent"})
    batch_size: int = field(default=16, metadata={"help": "items per batch"})
    threads: int = field(default=1, metadata={"help": "torch CPU threads"})
    show: int = field(default=8, metadata={"help": "print this many items' thoughts and answers"})
    json: str | None = field(default=None, metadata={"help": "write the per-item records here"})

    def __post_init__(self) -> None:
        if self.data and self.level:
            raise UsageError("--data and --level exclude each other. Give one")
        if not self.data and not self.level:
            self.level = "relay"
        if self.limit < 1:
            raise UsageError(f"--limit must be >= 1, got {self.limit}")


def run(args: argparse.Namespace) -> int:
    a = config_from_args(HandoffProbe, args)
    items = th.read_items(a.data) if a.data else th.make_items(a.level, a.limit, "test", a.seed)
    items = items[: a.limit]
    import torch

    import agents
    from agents.handoff import PROMPT_SET
    from latent import load_model

    torch.set_num_threads(a.threads)
    model = load_model(a.model)
    groups: dict[int, list[th.HandoffItem]] = {}
    for it in items:
        groups.setdefault(len(it.shares), []).append(it)
    recs = []
    for n_sh, group in groups.items():
        res = agents.run(
            agents.handoff_graph(n_sh, "latent"), model, [it.question for it in group], method="latent_mas",
            prompts=PROMPT_SET, latent_steps=a.latent_steps, max_new_tokens=a.max_new_tokens,
            batch_size=a.batch_size, threads=None, inspect_latents=5, shares=[it.shares for it in group],
        )  # fmt: skip
        recs += [probe_item(it, r) for it, r in zip(group, res)]
    where = a.data or f"level {a.level}, test split, seed {a.seed}"
    print(f"**{a.model}, {where}, {len(recs)} items, k={a.latent_steps}, latent_only**\n")
    for r in recs[: a.show]:
        th_txt = " / ".join(
            "["
            + " ".join(f"{t!r}:{p:.2f}" for t, p in zip(h["top1"], h["top1_p"]))
            + f"] holds {h['number']}"
            for h in r["holders"]
        )
        print(f"{r['id']}: asked {r['asked']}, thoughts {th_txt}, answer {r['answer_text']!r}")
    print()
    print(table(recs))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(recs, f, indent=1)
    return 0


def main(argv: list[str] | None = None) -> int:
    return run_script(
        "bench/studies/handoff_probe.py", __doc__, partial(add_config_arguments, cls=HandoffProbe), run, argv
    )


if __name__ == "__main__":
    raise SystemExit(main())
