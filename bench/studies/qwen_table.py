"""The LatentMAS paper's main table at this scale: Qwen2.5-Coder-0.5B/1.5B-Instruct, single / text_mas /
latent_mas, with the controls that say whether the latent channel does anything.

    python bench/studies/qwen_table.py plan                        # every cell and the command that runs it
    python bench/studies/qwen_table.py run --cell q05-gsm-seq      # run (or resume) one cell in the foreground
    RANK=1 WORLD_SIZE=2 python bench/studies/qwen_table.py run --cell q05-gsm-seq   # its second half, beside rank 0
    nohup nice python bench/studies/qwen_table.py queue &          # every unfinished cell in turn, two ranks each
    python bench/studies/qwen_table.py report                      # table, paired tests, verdicts, plot, quotes
    python bench/studies/qwen_table.py archive | restore           # carry unfinished runs across machines

Every cell runs `latentworks eval` (sandboxed code scoring, resumable results) under runs/qwen_table/<cell>.
The settings below are the same for every method and cell; the prompt set (`latent_aware`) was chosen on the
dev cells (rg:gsm_symbolic seed 1), never on the evaluation items (seed 0): under the `default` prompts the
0.5B final agent answers without working on 17 of 24 dev items, at 0 latent steps as at 10.
Why float32: in bfloat16 the thoughts drift 10-20% from float32 within 3-6 steps and by up to 13% between
batch 1 and batch 16 (bench/studies/bf16_thoughts.py), so a bf16 table would measure batch-dependent thoughts.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import NamedTuple

from latent.args import add_config_arguments, config_from_args, run_script

Q05, Q15 = "qwen2.5-coder-0.5b-instruct", "qwen2.5-coder-1.5b-instruct"
GSM, HE, ARC = "rg:gsm_symbolic", "humaneval", "arc_challenge"
METHODS = "single,text_mas,latent_mas"
# Fixed before the runs; the same for every method and cell (cells may only add a control's own flag).
SETTINGS = {
    "seed": 0,
    "latent_steps": 10,
    "max_new_tokens": 512,
    "prompts": "latent_aware",
    "dtype": "float32",
    "batch_size": 16,
    "threads": 1,
}
LIMIT = {GSM: 150, HE: None, ARC: 150}  # humaneval: all 164 items
PLANNED = {GSM: 150, HE: 164, ARC: 150}
# ARC-Challenge's test split, made offline by `python bench/data/make_mc_offline.py` (no hub needed)
DATA = {ARC: "bench/data/arc_challenge_test.jsonl"}
# The sequential graph with `latent` edges: the final agent reads the thoughts without the upstream prompts.
LATENT_VIEW = "examples/graphs/sequential_latent.yaml"


class Cell(NamedTuple):
    """One run: a model, a task, a graph, the methods, and the flags that differ from SETTINGS."""

    model: str
    task: str
    graph: str = "sequential"
    methods: str = METHODS
    flags: tuple[tuple[str, object], ...] = ()
    control_of: str | None = None  # the main cell whose latent_mas row this control is compared with
    dev: bool = False  # a dev cell (seed 1, 24 items): where prompts were chosen, never reported as a result

    def settings(self) -> dict:
        found = {**SETTINGS, "limit": LIMIT[self.task], "data": DATA.get(self.task)}
        if self.dev:
            found.update(seed=1, limit=24, batch_size=12)
        return found | dict(self.flags)


def _controls(main: str, model: str) -> dict[str, Cell]:
    """latent_mas controls on a main cell's items: thoughts replaced, latent steps swept, realignment off."""
    base = {"model": model, "task": GSM, "methods": "latent_mas", "control_of": main}
    found = {
        f"{main}-thoughts-{t}": Cell(**base, flags=(("thoughts", t),)) for t in ("random", "other", "mean")
    }
    found |= {f"{main}-steps-{k}": Cell(**base, flags=(("latent_steps", k),)) for k in (0, 5, 20, 40)}
    found[f"{main}-identity"] = Cell(**base, flags=(("realign", "identity"),))
    # soft-token thoughts (not the paper's method): the thoughts moved onto the token embeddings' mixtures
    found[f"{main}-soft"] = Cell(**base, flags=(("realign", "soft"),))
    found[f"{main}-latent-view"] = Cell(**{**base, "graph": LATENT_VIEW})
    return found


CELLS: dict[str, Cell] = {
    "q15-gsm-seq": Cell(Q15, GSM),
    "q15-he-seq": Cell(Q15, HE),
    "q15-gsm-hier": Cell(Q15, GSM, "hierarchical"),
    "q05-gsm-seq": Cell(Q05, GSM),
    # the same cell with the `default` prompts, under which the final agent skips its working (dev cells)
    "q05-gsm-seq-default-prompts": Cell(Q05, GSM, flags=(("prompts", "default"),)),
    "q05-gsm-hier": Cell(Q05, GSM, "hierarchical"),
    "q05-he-seq": Cell(Q05, HE),
    "q05-he-hier": Cell(Q05, HE, "hierarchical"),
    "q15-arc-seq": Cell(Q15, ARC),
    "q05-arc-seq": Cell(Q05, ARC),
    **_controls("q05-gsm-seq", Q05),
    **_controls("q15-gsm-seq", Q15),
    # Dev cells: the diagnosis of the latent_mas collapse and the choice of the prompt set.
    "dev-q05-base": Cell(Q05, GSM, methods="single,latent_mas", flags=(("prompts", "default"),), dev=True),
    "dev-q05-steps0": Cell(
        Q05, GSM, methods="latent_mas", flags=(("latent_steps", 0), ("prompts", "default")), dev=True
    ),
    "dev-q05-note": Cell(Q05, GSM, methods="latent_mas", flags=(("prompts", "memory_note"),), dev=True),
    "dev-q05-latent-view": Cell(
        Q05, GSM, LATENT_VIEW, methods="latent_mas", flags=(("prompts", "default"),), dev=True
    ),
    "dev-q05-aware-steps0": Cell(Q05, GSM, methods="latent_mas", flags=(("latent_steps", 0),), dev=True),
    "dev-q05-aware": Cell(Q05, GSM, methods="latent_mas", dev=True),
    "dev-q15-aware": Cell(Q15, GSM, methods="single,latent_mas", flags=(("limit", 12),), dev=True),
    "dev-q15-aware-steps0": Cell(
        Q15, GSM, methods="latent_mas", flags=(("limit", 12), ("latent_steps", 0)), dev=True
    ),
    # the 1.5B's final agent writes garbage after real thoughts (dev-q15-aware): soft tokens, on dev items first
    "dev-q15-soft": Cell(
        Q15, GSM, methods="latent_mas", flags=(("limit", 12), ("realign", "soft")), dev=True
    ),
    "dev-q05-soft": Cell(Q05, GSM, methods="latent_mas", flags=(("realign", "soft"),), dev=True),
}
SHORT = 40  # final-agent output tokens below which an answer carries no working (read off the dev outputs)
RUNS = Path("runs/qwen_table")
REPORT = Path("bench/results/qwen_table")


def eval_argv(name: str, cell: Cell, runs: Path = RUNS) -> list[str]:
    """The `latentworks eval` command line of a cell (with --resume once its run exists)."""
    s = cell.settings()
    argv = ["latentworks", "eval", "--model", cell.model, "--task", cell.task, "--graph", cell.graph]
    argv += ["--methods", cell.methods, "--out", str(runs / name), "--no-progress"]
    for key, value in s.items():
        if value is not None:
            argv += [f"--{key.replace('_', '-')}", str(value)]
    if (runs / name / "manifest.json").is_file():
        argv.append("--resume")
    return argv


# ----------------------------------------------------------------------------- queue
def missing(name: str, cell: Cell, runs: Path = RUNS) -> int:
    """(item, method) records the cell still lacks; 0 once it is complete."""
    planned = cell.settings()["limit"] or PLANNED[cell.task]
    done = set()
    for f in (runs / name).glob("results*.jsonl"):
        for line in f.read_text().splitlines():
            try:
                r = json.loads(line)
                done.add((r["item_id"], r["method"]))
            except (ValueError, KeyError, TypeError):
                continue  # a torn last line: the run rewrites it on resume
    return planned * len(cell.methods.split(",")) - len(done)


def queue(names: list[str], ranks: int, runs: Path = RUNS) -> int:
    """Run cells one after another, each as `ranks` single-thread processes side by side; complete cells
    are skipped and a stopped queue resumes where it stopped, so it can be started again each sitting."""
    exe = shutil.which("latentworks") or sys.executable
    for name in names:
        cell = CELLS[name]
        if missing(name, cell, runs) <= 0:
            print(f"{name}: complete", flush=True)
            continue
        t0, procs = time.time(), []
        for rank in range(ranks):
            env = {**os.environ, "RANK": str(rank), "WORLD_SIZE": str(ranks), "OMP_NUM_THREADS": "1"}
            log = open(runs / f"{name}.rank{rank}.log", "a")  # noqa: SIM115 (closed after the wait)
            procs.append(
                (
                    subprocess.Popen(
                        [exe, *eval_argv(name, cell, runs)[1:]], env=env, stdout=log, stderr=subprocess.STDOUT
                    ),
                    log,
                )
            )
            while rank == 0 and ranks > 1 and not (runs / name / "manifest.json").is_file():
                if procs[0][0].poll() is not None:
                    break
                time.sleep(1)  # the other ranks resume rank 0's run: they start once its manifest exists
        codes = [p.wait() for p, _ in procs]
        for _, log in procs:
            log.close()
        print(
            f"{name}: exit {codes} after {time.time() - t0:.0f} s, {missing(name, cell, runs)} records left",
            flush=True,
        )
        if any(codes):
            return 1
    return 0


# ----------------------------------------------------------------------------- report
def _cell_rows(name: str, cell: Cell, runs: Path) -> dict | None:
    from eval.report import paired_counts, summarize, time_ratio_spread
    from eval.run_state import load_results

    if not any((runs / name).glob("results*.jsonl")):
        return None
    try:
        records = load_results(runs / name)
    except ValueError:  # started, nothing written yet
        return None
    # Only the items every method of the cell has run, so rows, paired tests and ratios share one item set
    # (a stopped run can leave its last batch done for some methods only).
    ran = [{r["item_id"] for r in records if r["method"] == m} for m in cell.methods.split(",")]
    common = set.intersection(*ran)
    if not common:
        return None
    records = [r for r in records if r["item_id"] in common]
    row = {
        "cell": name,
        "model": cell.model,
        "task": cell.task,
        "graph": cell.graph,
        "settings": cell.settings(),
    }
    row["methods"] = summarize(records)
    for m in row["methods"]:  # the final agent answering without working: under SHORT output tokens
        # (an item recorded as a context overflow has no agent turns: it never reached the final agent)
        finals = [
            r["agents"][-1]["output_tokens"] for r in records if r["method"] == m["method"] and r["agents"]
        ]
        m["short_final_answers"] = sum(n < SHORT for n in finals)
        # ... and running to the token budget (loops and repeated words, read off the dev outputs)
        m["final_answers_at_budget"] = sum(n >= cell.settings()["max_new_tokens"] for n in finals)
    if "latent_mas" in cell.methods and "," in cell.methods:
        for other in ("text_mas", "single"):
            if other in cell.methods:
                row[f"latent_mas_vs_{other}"] = paired_counts(records, "latent_mas", other)
        row["time_ratio_text_over_latent"] = time_ratio_spread(records)
    row["records"] = [
        {k: r[k] for k in ("item_id", "method", "correct", "output_tokens", "wall_s")} for r in records
    ]
    return row


def _verdicts(row: dict) -> list[str]:
    """One line per claim of the paper, with the number behind it."""
    by = {m["method"]: m for m in row["methods"]}
    if not {"single", "text_mas", "latent_mas"} <= by.keys():
        return ["incomplete: not every method has run"]
    lat, txt = by["latent_mas"], by["text_mas"]
    out = []
    for other in ("text_mas", "single"):
        pc = row[f"latent_mas_vs_{other}"]
        diff = lat["accuracy"] - by[other]["accuracy"]
        if pc["p_mcnemar"] < 0.05:
            verdict = "holds (latent_mas higher)" if diff > 0 else "does not hold"
        else:
            verdict = "holds (no significant difference)" if diff >= 0 else "not measurable at this n"
        out.append(
            f"accuracy vs {other}: {verdict}: {diff:+.1%} points, {pc['only_latent_mas']} vs "
            f"{pc[f'only_{other}']} discordant items, exact McNemar p = {pc['p_mcnemar']:.3g}"
        )
    fewer = 1 - lat["output_tokens"] / max(txt["output_tokens"], 1e-9)
    out.append(
        f"output tokens (paper: 70.8-83.7% fewer): {'holds' if fewer >= 0.708 else 'does not hold'}: "
        f"{fewer:.1%} fewer ({lat['output_tokens']:.0f} vs {txt['output_tokens']:.0f} per item)"
    )
    spread = row.get("time_ratio_text_over_latent") or {}
    ratio = txt["seconds_per_item"] / max(lat["seconds_per_item"], 1e-9)
    span = f", per batch {spread['min']:.2f}-{spread['max']:.2f}x" if spread else ""
    out.append(f"speed (paper: about 4x): {'holds' if ratio >= 4 else 'does not hold'}: {ratio:.2f}x{span}")
    return out


METHOD_HEADER = [
    f"| cell | method | n | accuracy [95% Wilson] | output tokens | final answers < {SHORT} tokens "
    "| final answers at the budget | s / item |",
    "|---|---|---|---|---|---|---|---|",
]


def _method_rows(rows: list[dict]) -> list[str]:
    """One table line per method of each row: accuracy with its interval, tokens, answer shapes, time."""
    lines = []
    for r in rows:
        for m in r["methods"]:
            acc = f"{m['accuracy']:.1%} [{m['ci_low']:.1%}, {m['ci_high']:.1%}]"
            lines.append(
                f"| {r['cell']} | {m['method']} | {m['n']} | {acc} | {m['output_tokens']:.0f} | "
                f"{m['short_final_answers']} | {m.get('final_answers_at_budget', '-')} | "
                f"{m['seconds_per_item']:.2f} |"
            )
    return lines


def _verdict_row(row: dict) -> str:
    """The paper's four claims on one cell, one table line: verdict word and the number behind it."""
    by = {m["method"]: m for m in row["methods"]}
    done = min(m["n"] for m in row["methods"])
    planned = PLANNED.get(row["task"], done)
    items = f"{done}" if done >= planned else f"{done} of {planned} (partial, shortest first)"
    if not {"single", "text_mas", "latent_mas"} <= by.keys():
        return f"| {row['cell']} | {items} | incomplete: not every method has run | | | | | | |"
    accs = [
        f"{by[k]['accuracy']:.1%} [{by[k]['ci_low']:.1%}, {by[k]['ci_high']:.1%}]" for k in METHODS.split(",")
    ]
    cells = []
    for v in _verdicts(row):
        verdict, number = re.match(
            r".*?: (holds[^:]*|does not hold|not measurable at this n): (.*)", v
        ).groups()
        short = number.replace(" discordant items, exact McNemar p =", ", p").replace(" points", " pts")
        cells.append(f"{verdict}: {short}")
    return f"| {row['cell']} | {items} | " + " | ".join(accs + cells) + " |"


def _markdown(rows: list[dict], machine: str) -> str:

    lines = ["# The LatentMAS main table on Qwen2.5-Coder-0.5B/1.5B-Instruct", "", f"Machine: {machine}.", ""]
    lines += [
        f"Settings (every method, every cell): `{json.dumps(SETTINGS)}`; rg:gsm_symbolic 150 items, "
        "humaneval all 164, arc_challenge (test split) the first 150. Each row counts the items every method of its "
        "cell has run. Commands: `python bench/studies/qwen_table.py run --cell CELL`, then `report`.",
        "",
    ]
    lines += METHOD_HEADER
    main = [r for r in rows if not CELLS[r["cell"]].control_of and not CELLS[r["cell"]].dev]
    lines += _method_rows(main + [r for r in rows if CELLS[r["cell"]].dev])
    for r in main:
        done = min(m["n"] for m in r["methods"])
        planned = PLANNED.get(r["task"], done)
        part = (
            f" (partial: {done} of {planned} items per method so far; the runner reads the shortest questions first,"
            " so a partial cell is not a random sample)"
            if done < planned
            else ""
        )
        lines += ["", f"**{r['cell']}**{part}:"] + [f"- {v}" for v in _verdicts(r)]
    controls = _control_lines(rows)
    if controls:
        lines += [
            "",
            "## Controls (latent_mas only, paired with the main cell's latent_mas on the items both ran)",
            "",
        ]
        lines += controls
    return "\n".join(lines) + "\n"


def _control_lines(rows: list[dict]) -> list[str]:
    """The controls table (header and one line per control cell), empty when no control has run."""
    controls = [r for r in rows if r["cell"] in CELLS and CELLS[r["cell"]].control_of]
    if not controls:
        return []
    lines = [
        f"| control | n | accuracy [95% Wilson] | main latent_mas on the same items | output tokens | "
        f"final answers < {SHORT} tokens | at the budget | only main / only control, exact p | "
        "vs the main cell's single: only single / only control, exact p |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    by_name = {r["cell"]: r for r in rows}
    for r in controls:
        m = r["methods"][0]
        lines.append(f"| {r['cell']} | " + _control_cells(m, r, by_name.get(CELLS[r["cell"]].control_of)))
    return lines


def _control_pairs(m: dict, row: dict, main: dict | None) -> dict[str, str]:
    """A control's accuracy and its pairings with the main cell's latent_mas and single on shared items."""
    from eval.report import paired_counts, wilson

    out = {"acc": f"{m['accuracy']:.1%} [{m['ci_low']:.1%}, {m['ci_high']:.1%}]"}
    out |= {"same": "main cell not run", "paired": "-", "vs_single": "-"}
    if main and any(x["method"] == "single" for x in main["records"]):
        single = [x for x in main["records"] if x["method"] == "single"]
        pc = paired_counts(single + [{**x, "method": "control"} for x in row["records"]], "single", "control")
        out["vs_single"] = f"{pc['only_single']} / {pc['only_control']}, p = {pc['p_mcnemar']:.3g}"
    if main:
        recs = [{**x, "method": "main"} for x in main["records"] if x["method"] == "latent_mas"]
        pc = paired_counts(recs + row["records"], "main", "latent_mas")
        k = pc["both_right"] + pc["only_main"]
        lo, hi = wilson(k, pc["n"]) if pc["n"] else (0.0, 0.0)
        out["same"] = f"{k}/{pc['n']} = {k / max(pc['n'], 1):.1%} [{lo:.1%}, {hi:.1%}]"
        out["paired"] = f"{pc['only_main']} / {pc['only_latent_mas']}, p = {pc['p_mcnemar']:.3g}"
    return out


def _control_cells(m: dict, row: dict, main: dict | None) -> str:
    """A control row's cells after its name, paired with the main cell's latent_mas on shared items."""
    c = _control_pairs(m, row, main)
    return (
        f"{m['n']} | {c['acc']} | {c['same']} | {m['output_tokens']:.0f} | {m['short_final_answers']} | "
        f"{m.get('final_answers_at_budget', '-')} | {c['paired']} | {c['vs_single']} |"
    )


CONTROL_KINDS = (
    "thoughts-random", "thoughts-other", "thoughts-mean", "steps-0", "steps-5", "steps-20", "steps-40",
    "identity", "latent-view", "soft",
)  # fmt: skip


def _control_grid(rows: list[dict]) -> list[str]:
    """The controls as BENCHMARKS.md quotes them: per main cell three lines (accuracy; paired with its
    latent_mas; paired with its single), one column per control, '-' where a control has not run."""
    by_name = {r["cell"]: r for r in rows}
    mains = sorted(
        {CELLS[r["cell"]].control_of for r in rows if r["cell"] in CELLS and CELLS[r["cell"]].control_of}
    )
    if not mains:
        return []
    lines = [
        "| main cell | row | " + " | ".join(CONTROL_KINDS) + " |",
        "|---|---|" + "---|" * len(CONTROL_KINDS),
    ]
    for main in mains:
        pairs = {}
        for kind in CONTROL_KINDS:
            row = by_name.get(f"{main}-{kind}")
            if row:
                pairs[kind] = _control_pairs(row["methods"][0], row, by_name.get(main))
                pairs[kind]["acc"] += f" (n {row['methods'][0]['n']})"
            else:
                pairs[kind] = {}
        for key, label in (
            ("acc", "accuracy [95% Wilson] (items)"),
            ("paired", "only main latent_mas / only control, exact p"),
            ("vs_single", "only main single / only control, exact p"),
        ):
            cells = [pairs[k].get(key, "-").replace(", p = ", ", p ") for k in CONTROL_KINDS]
            lines.append(f"| {main} | {label} | " + " | ".join(cells) + " |")
    return lines


def _plot(rows: list[dict], path: Path) -> None:
    from latent.plotting import figure, save_figure

    main = [r for r in rows if not CELLS[r["cell"]].control_of]
    if not main:
        return
    fig, axes = figure(1, len(main), figsize=(3.4 * len(main), 3.4), squeeze=False)
    for ax, r in zip(axes[0], main):
        for m in r["methods"]:
            err = [[m["accuracy"] - m["ci_low"]], [m["ci_high"] - m["accuracy"]]]
            ax.errorbar(m["seconds_per_item"], m["accuracy"], yerr=err, fmt="o", capsize=3, label=m["method"])
        ax.set_title(r["cell"], fontsize=9)
        ax.set_xlabel("seconds / item")
        ax.set_ylabel("accuracy (95% Wilson)")
        ax.set_ylim(-0.02, 1.02)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    fig.tight_layout()
    save_figure(fig, path, dpi=110)


def _cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def report(runs: Path = RUNS, out: Path = REPORT, quote_in: tuple[Path, ...] = ()) -> int:
    """Write report.md/json and the plot into `out`; rewrite the quotes in the pages `quote_in` names."""
    rows = [row for name, cell in CELLS.items() if (row := _cell_rows(name, cell, runs)) is not None]
    if not rows:
        print(
            f"no cell has results under {runs}: run `python bench/studies/qwen_table.py run --cell CELL` first"
        )
        return 1
    machine = f"{_cpu_name()}, {os.cpu_count()} CPUs, 1 torch thread per job, two jobs side by side"
    text = _markdown(rows, machine)
    out.mkdir(parents=True, exist_ok=True)
    (out / "report.md").write_text(text)
    payload = {"settings": SETTINGS, "machine": machine, "cells": rows}
    (out / "report.json").write_text(json.dumps(payload, indent=1) + "\n")
    _plot(rows, out / "accuracy_vs_time.png")
    for page in quote_in:
        if page.is_file() and sync_quotes(payload, page):
            print(f"updated the quoted table in {page}")
    print(text)
    return 0


# ----------------------------------------------------------------------------- quotes of the report
# Pages that quote the report between markers; `report` rewrites the quotes, a test checks they agree.
QUOTING = (Path("BENCHMARKS.md"), Path("README.md"))
TABLE_MARKS = (
    "<!-- qwen table: generated from bench/results/qwen_table/report.md -->",
    "<!-- end qwen table -->",
)
HEADLINE_MARKS = (
    "<!-- qwen headline: generated from bench/results/qwen_table/report.json -->",
    "<!-- end qwen headline -->",
)


def quoted_table(payload: dict) -> str:
    """One line per main cell (each method's accuracy and the paper's four claims) and the controls, as
    BENCHMARKS.md quotes them; tokens, answer shapes, times and the dev cells stay in the report."""
    main = [
        r
        for r in payload["cells"]
        if r["cell"] in CELLS and not CELLS[r["cell"]].dev and not CELLS[r["cell"]].control_of
    ]
    source = "Source: [qwen_table/report.md](bench/results/qwen_table/report.md)."
    lines = [
        "| cell | items | single | text_mas | latent_mas | latent_mas vs text_mas | vs single "
        "| output tokens (paper: 70.8-83.7% fewer) | speed (paper: about 4x) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    lines += [_verdict_row(r) for r in main] + ["", source]
    controls = _control_grid(payload["cells"])
    if controls:
        lines += [
            "",
            "Controls on the main cells' items (latent_mas only: thoughts replaced, the steps sweep, realignment off, "
            "the final agent reading the thoughts only; tokens and answer shapes in the source):",
            "",
        ]
        lines += controls + ["", source]
    return "\n".join(lines)


def headline(payload: dict) -> str:
    """One line for the README: each main cell's accuracy per method and its n (ablations stay out)."""
    parts = []
    for row in payload["cells"]:
        cell = CELLS.get(row["cell"])
        if cell is None or cell.dev or cell.control_of or cell.flags:
            continue
        by = {m["method"]: m for m in row["methods"]}
        accs = ", ".join(f"{k} {m['accuracy']:.1%}" for k, m in by.items())
        n = min(m["n"] for m in by.values())
        parts.append(f"`{row['cell']}` ({n} of {PLANNED.get(row['task'], n)} items) {accs}")
    return "; ".join(parts) + "."


def _replace_between(text: str, marks: tuple[str, str], body: str) -> str:
    start = text.index(marks[0]) + len(marks[0])
    end = text.index(marks[1], start)
    return text[:start] + "\n" + body + "\n" + text[end:]


def sync_quotes(payload: dict, page: Path) -> bool:
    """Rewrite the report's quotes in `page` (only where its markers are); True when the page changed."""
    old = text = page.read_text()
    if TABLE_MARKS[0] in text:
        text = _replace_between(text, TABLE_MARKS, quoted_table(payload))
    if HEADLINE_MARKS[0] in text:
        text = _replace_between(text, HEADLINE_MARKS, headline(payload))
    if text != old:
        page.write_text(text)
    return text != old


# ----------------------------------------------------------------------------- carrying runs
def archive(runs: Path = RUNS, out: Path = REPORT / "archive") -> int:
    """Compress every cell's manifest and results into `out` (small), so a later machine can resume."""
    out.mkdir(parents=True, exist_ok=True)
    for d in sorted(p for p in runs.iterdir() if p.is_dir()):
        files = {
            f.name: f.read_text()
            for f in [d / "manifest.json", *sorted(d.glob("results*.jsonl"))]
            if f.is_file()
        }
        (out / f"{d.name}.json.gz").write_bytes(gzip.compress(json.dumps(files).encode(), mtime=0))
    print(f"archived {len(list(out.glob('*.json.gz')))} runs into {out}")
    return 0


def restore(src: Path = REPORT / "archive", runs: Path = RUNS) -> int:
    """Unpack archived runs that are not here yet (a run already here is never overwritten)."""
    for f in sorted(src.glob("*.json.gz")):
        d = runs / f.name.removesuffix(".json.gz")
        if d.exists():
            print(f"kept {d} (already here)")
            continue
        d.mkdir(parents=True)
        for name, text in json.loads(gzip.decompress(f.read_bytes())).items():
            (d / Path(name).name).write_text(text)
        print(f"restored {d}")
    return 0


ACTIONS = ("plan", "run", "queue", "report", "archive", "restore")
# The queue's default order: the 0.5B main cell and the controls that say why latent_mas loses; then the
# 1.5B gsm cell with the two controls that test why its final agent writes garbage after real thoughts
# (soft tokens, no thoughts); then the remaining main cells (cheapest first), then the other 1.5B controls.
ORDER = tuple(dict.fromkeys((
    "q05-gsm-seq",
    *(f"q05-gsm-seq-{c}" for c in ("steps-0", "thoughts-random", "thoughts-other", "thoughts-mean")),
    *(f"q05-gsm-seq-{c}" for c in ("identity", "latent-view", "steps-5", "steps-20", "steps-40")),
    "q05-he-seq",
    "q05-gsm-seq-soft",
    "q15-gsm-seq",
    "q15-gsm-seq-soft",
    "q15-gsm-seq-steps-0",
    "q05-gsm-hier",
    "q05-he-hier",
    "q05-arc-seq",
    "q15-he-seq",
    "q15-gsm-hier",
    "q15-arc-seq",
    *(name for name, cell in CELLS.items() if cell.control_of == "q15-gsm-seq"),
)))  # fmt: skip


@dataclass
class TableOptions:
    """What to do: list the cells, run one, or report on every cell that has results."""

    action: str = field(
        metadata={
            "positional": True,
            "choices": list(ACTIONS),
            "help": "plan (every cell's command), run (one cell, resumable), report, archive or restore",
        }
    )
    cell: str | None = field(default=None, metadata={"help": "the cell to run (see `plan`)"})
    cells: str = field(
        default=",".join(ORDER),
        metadata={"help": "queue: the cells to run one after another (comma-separated)"},
    )
    ranks: int = field(default=2, metadata={"help": "queue: single-thread processes per cell, side by side"})
    runs: str = field(default=str(RUNS), metadata={"help": "folder of the cells' runs"})
    out: str = field(default=str(REPORT), metadata={"help": "folder of the committed report"})


def run(args: argparse.Namespace) -> int:
    opts = config_from_args(TableOptions, args)
    runs, out = Path(opts.runs), Path(opts.out)
    if opts.action == "plan":
        for name, cell in CELLS.items():
            print(f"{name:<32} {' '.join(eval_argv(name, cell, runs))}")
        return 0
    if opts.action == "run":
        if opts.cell not in CELLS:
            print(f"error: --cell must be one of the cells `plan` lists, got {opts.cell!r}.", file=sys.stderr)
            return 2
        argv_ = eval_argv(opts.cell, CELLS[opts.cell], runs)
        print(" ".join(argv_), flush=True)
        t0 = time.time()
        code = subprocess.call([shutil.which("latentworks") or sys.executable, *argv_[1:]])
        print(f"{opts.cell}: exit {code} after {time.time() - t0:.0f} s", flush=True)
        return code
    if opts.action == "queue":
        names = [c for c in opts.cells.split(",") if c]
        unknown = [c for c in names if c not in CELLS]
        if unknown or opts.ranks < 1:
            print(f"error: unknown cells {unknown} (see `plan`) or --ranks < 1.", file=sys.stderr)
            return 2
        return queue(names, opts.ranks, runs)
    if opts.action == "report":  # the committed report is the one the pages quote
        return report(runs, out, QUOTING if out.resolve() == REPORT.resolve() else ())
    if opts.action == "archive":
        return archive(runs, out / "archive")
    return restore(out / "archive", runs)


def main(argv: list[str] | None = None) -> int:
    return run_script(
        "bench/studies/qwen_table.py", __doc__, partial(add_config_arguments, cls=TableOptions), run, argv
    )


if __name__ == "__main__":
    raise SystemExit(main())
