"""What a thought-channel run reports: held-out tables before and after, the solver accuracy of a
built-in model, and the model card (`card.json`, `README.md`, `loss_curve.png`) written next to the
trained model. `cfg` below is a `finetune.thought_channel.ThoughtChannelConfig` (not imported: the
trainer imports this module)."""

from __future__ import annotations

import json
import logging
import math
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from eval.report import wilson
from eval.tasks import handoff as th
from finetune.model_card import LOSS_CURVE, card_markdown, write_model_card
from latent.catalogue import BUILTIN_DIR, BUILTIN_PREFIX

if TYPE_CHECKING:
    from eval.tasks.handoff_rows import Pair
    from latent import LatentModel

logger = logging.getLogger(__name__)
ARITH_MAX_NEW_TOKENS = 96  # held-out arith problems' decode budget

HANDOFF_ROWS = (
    "no_info",
    "oracle",
    "text_mas",
    "latent_only",
    "latent_only_random",
    "latent_only_other",
    "latent_only_const",
)


def eval_settings(cfg: Any) -> dict:
    """What a held-out table depends on, besides the model: a table saved under other settings is stale."""
    keys = (
        "task",
        "levels",
        "eval_n",
        "eval_seed",
        "max_new_tokens",
        "latent_steps",
        "graphs",
        "prompt_sets",
    )
    return {k: getattr(cfg, k) for k in keys} | {"sender": cfg.sender, "bridge": cfg.bridge}


def read_table(path: Path | None, settings: dict) -> dict | None:
    """Rows a (stopped or finished) evaluation saved under the same settings; None when there is no such file."""
    if path is None or not path.is_file():
        return None
    saved = json.loads(path.read_text())
    return saved["rows"] if saved.get("settings") == settings else None


def _save_partial(path: Path | None, settings: dict, rows: dict) -> None:
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps({"settings": settings, "rows": rows}, indent=2))
        tmp.replace(path)


def evaluate(cfg: Any, lm: LatentModel, pair: Pair | None = None, partial: Path | None = None) -> dict:
    """Held-out results of `lm`: hand-off rows per level on `eval_n` test items (seed 0, as
    `bench/studies/handoff.py` scores them; with `pair`, the holders run its sender and hand on through its bridge),
    or single / text_mas / latent_mas per graph on `eval_n` held-out arith problems (seed `eval_seed`).
    Each cell: correct, n, wall seconds. With `partial`, each finished row is saved there as it ends and a
    stopped evaluation under the same settings resumes from it (on a CPU a table takes up to an hour)."""
    if cfg.eval_n == 0:
        return {}
    settings = eval_settings(cfg)
    out = read_table(partial, settings) or {}
    if cfg.task == "handoff":
        from eval.tasks.handoff_rows import MAX_NEW_TOKENS, run_row

        for level in dict.fromkeys(cfg.levels):
            items = th.make_items(level, cfg.eval_n, "test", 0)
            out.setdefault(level, {})
            for name in HANDOFF_ROWS:
                if name in out[level]:
                    continue
                r = run_row(lm, items, name, cfg.latent_steps, cfg.max_new_tokens or MAX_NEW_TOKENS, 16, pair)
                out[level][r.name] = {"correct": r.correct, "n": r.n, "wall_s": r.s_per_item * r.n}
                _log_cell(level, r.name, out[level][r.name])
                _save_partial(partial, settings, out)
        return out
    import agents
    from eval.tasks.arith_data import extract_boxed_int, make_problems

    problems = make_problems(cfg.eval_n, seed=cfg.eval_seed, split="heldout")
    runs = [(m, cfg.prompt_sets[0]) for m in agents.METHODS] + [
        ("latent_mas", p) for p in cfg.prompt_sets[1:]
    ]
    for graph in cfg.graphs:
        for method, prompts in runs:
            name = method if prompts == cfg.prompt_sets[0] else f"{method} ({prompts})"
            if name in out.get(graph, {}):
                continue
            run = agents.RunConfig(
                method=method,
                latent_steps=cfg.latent_steps,
                max_new_tokens=cfg.max_new_tokens or ARITH_MAX_NEW_TOKENS,
                batch_size=16,
                threads=None,
                prompts=prompts,
            )
            t0 = time.perf_counter()
            res = agents.run(graph, lm, [p.question for p in problems], config=run)
            ok = sum(extract_boxed_int(r.text) == p.answer for r, p in zip(res, problems))
            out.setdefault(graph, {})[name] = {
                "correct": ok,
                "n": len(problems),
                "wall_s": time.perf_counter() - t0,
            }
            _log_cell(graph, name, out[graph][name])
            _save_partial(partial, settings, out)
    return out


def _log_cell(group: str, row: str, cell: dict) -> None:
    """One line per finished row: held-out evaluation takes minutes to an hour on a CPU."""
    logger.info("held-out %s %s: %d/%d (%.0f s)", group, row, cell["correct"], cell["n"], cell["wall_s"])


def param_count(model_dir: Path) -> int:
    """Parameters in a saved model's safetensors files, read from their headers (no weights load)."""
    from safetensors import safe_open

    total = 0
    for file in sorted(Path(model_dir).glob("*.safetensors")):
        with safe_open(str(file), "pt") as f:
            for key in f.keys():  # noqa: SIM118 (safe_open has no __iter__)
                total += math.prod(f.get_slice(key).get_shape())
    return total


def solver_accuracy(model_path: str, seed: int = 2024, n_per_steps: int = 256) -> dict:
    """A built-in model's solver accuracy: greedy, held-out templates, `n_per_steps` problems of 2 and 3
    steps."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from eval.tasks.arith_data import make_problems
    from finetune.train_builtin import accuracy_by_steps

    model = AutoModelForCausalLM.from_pretrained(model_path, local_files_only=True, dtype=torch.float32)
    tok = AutoTokenizer.from_pretrained(model_path, local_files_only=True)
    problems = make_problems(2 * n_per_steps, seed=seed, split="heldout", steps=(2, 3))
    by_steps, ok = accuracy_by_steps(model, tok, problems)
    return {"acc": sum(ok) / len(ok), "n": len(ok), "by_steps": {str(k): v for k, v in by_steps.items()}}


def table(before: dict, after: dict) -> str:
    """Markdown table of `evaluate` results: one line per (level or graph, row), before and after."""
    lines = ["| level / graph | row | before | after | after 95% CI |", "|---|---|---:|---:|---:|"]
    for group, rows in after.items():
        for name, a in rows.items():
            b = before.get(group, {}).get(name)
            lo, hi = wilson(a["correct"], a["n"])
            was = f"{b['correct']}/{b['n']}" if b else "-"
            lines.append(
                f"| {group} | {name} | {was} | {a['correct']}/{a['n']} | {100 * lo:.1f}-{100 * hi:.1f}% |"
            )
    return "\n".join(lines)


def card_tables(card: dict) -> str:
    """The held-out tables of a card, as markdown (the solver line for built-in models)."""
    out = (
        table(card["eval_before"], card["eval_after"])
        if card["eval_after"]
        else "(no evaluation: eval_n = 0)"
    )
    if card.get("solver"):
        s = card["solver"]
        out += f"\n\nSolver accuracy (greedy, held-out templates, {s['n']} problems of 2-3 operations): "
        out += f"{s['acc']:.1%}"
    return out


def _loss_curves(stages: list[dict]) -> list[tuple[str, list, list]]:
    """Training loss per batch kind against optimizer steps, stages in turn."""
    kinds = sorted({k for st in stages for e in st["log"] for k in e if k.startswith("loss_")})
    curves = []
    for key in kinds:
        xs, ys, offset = [], [], 0
        for st in stages:
            xs += [offset + e["step"] for e in st["log"] if key in e]
            ys += [e[key] for e in st["log"] if key in e]
            offset += st["steps"]
        curves.append((key.removeprefix("loss_"), xs, ys))
    return curves


def _stage_line(stage: dict) -> str:
    c = stage["config"]
    keys = ("kv_frac", "random_names", "arith_frac", "token_thought_frac", "embed_weight")
    on = [f"{k} {c[k]}" for k in keys if c[k]] + [
        k for k in ("relevance_notes", "arith_skip_test_sums") if c[k]
    ]
    if c["working_levels"]:
        on.append(f"working on {c['working_levels']}")
    if c["task"] == "handoff":
        what = f"levels {c['levels']}, anti-shortcut {c['anti_weight']}, thought-note {c['note_weight']}"
    else:
        what = f"graphs {c['graphs']}, latent share {c['latent_frac']}"
    minutes = stage["wall_s"] / 60
    head = f"- {stage['steps']} steps (schedule of {c['max_steps']}), {minutes:.1f} min, seed {c['seed']}"
    tail = f"batch {c['batch_size']}, lr {c['lr']}, thoughts {c['latent_curriculum']}; {what}"
    return f"{head}, {tail}" + "".join(f"; {x}" for x in on)


def write_card(cfg: Any, stages: list[dict], before: dict, command: str) -> dict:
    """Evaluate the saved model and write its card (card.json + README.md + loss curve) next to it and
    into `out_dir` (`finetune.model_card`); returns the card."""
    import torch
    import transformers

    from latent import load_model

    path = cfg.export_path
    partial = Path(cfg.out_dir) / "eval_after.partial.json"  # a stopped run's finished rows, read on the next
    if cfg.sender:  # a bridge: evaluated between the two models it names
        from finetune.bridge_channel import load_trained

        after = evaluate(cfg, *load_trained(cfg), partial=partial) if cfg.eval_n else {}
    else:
        after = evaluate(cfg, load_model(str(path)), partial=partial) if cfg.eval_n else {}
    first = stages[0]["config"]
    card = {
        "name": cfg.name,
        "version": cfg.version,
        "base": first["base"],
        "sender": first.get("sender") or None,
        "task": cfg.task,
        "train_command": command,
        "latent_steps": cfg.latent_steps,
        "steps": sum(s["steps"] for s in stages),
        "wall_time_s": round(sum(s["wall_s"] for s in stages), 1),
        "stages": [{k: s[k] for k in ("config", "steps", "wall_s")} for s in stages],
        "eval_before": before,
        "eval_after": after,
        "solver": solver_accuracy(str(path)) if first["base"].startswith("builtin:") and cfg.eval_n else None,
        "heldout_checks": [s["heldout_checks"] for s in stages] if cfg.task == "handoff" else None,
        "transformers_version": transformers.__version__,
        "torch_version": torch.__version__,
    }
    if card["solver"]:  # what `latentworks models list` shows for a built-in model
        card |= {"params": param_count(path), "heldout_accuracy": card["solver"]["acc"]}
    kind = "every weight" if cfg.builtin else f"a LoRA (r {cfg.lora_r}) and a {cfg.aligner} aligner"
    shipped = path.resolve().parent == BUILTIN_DIR.resolve()
    load = (
        (f'`load_model("{BUILTIN_PREFIX}{path.name}")`' if shipped else f"`load_model({str(path)!r})`")
        if cfg.builtin
        else f'`load_model("{cfg.name}")` (its base must be pulled)'
    )
    if cfg.sender:
        kind = f"a {cfg.bridge} bridge from `{cfg.sender}`" + (
            " and a receiver LoRA" if cfg.trainable == "lora" else ""
        )
        load = f'`latent.bridge.Bridge.from_pretrained("{cfg.name}")` (both models must be pulled)'
    intro = (
        f"`{first['base']}` with its thought channel trained on the {cfg.task} task by "
        f"`finetune/thought_channel.py`\n({kind}, {cfg.latent_steps} thoughts per upstream agent). "
        f"Load it with {load}."
    )
    made = (
        f"- Command: `{command}` ({len(stages)} stage(s), {card['wall_time_s'] / 60:.1f} min of training,\n"
        f"  {cfg.threads} torch thread; every setting in `card.json`, `stages`).\n"
        + "\n".join(_stage_line(s) for s in stages)
        + f"\n\n{LOSS_CURVE}"
    )
    title = cfg.name + (f" (version {cfg.version})" if cfg.version else "")
    readme = card_markdown(title, intro, [("How it was made", made), ("Held-out results", card_tables(card))])
    write_model_card(path, card, readme, _loss_curves(stages), xlabel="optimizer step (stages in turn)")
    (Path(cfg.out_dir) / "card.json").write_text(json.dumps(card, indent=2) + "\n")
    return card
