"""Results tables of `latentworks dlm eval`: IQM + stratified-bootstrap intervals, Wilson intervals for
rates, and the probability that DLM improves on each baseline with a plain wins / ties / loses verdict."""

from __future__ import annotations

from itertools import zip_longest
from typing import Any

import numpy as np

from finetune.dlm.stats import probability_of_improvement, summary, verdict

__all__ = ["merge_results", "results_markdown", "row_arrays"]

DLM_METHODS = ("DLM-SFT", "DLM-GRPO")


def row_arrays(row: dict[str, Any]) -> tuple[np.ndarray, np.ndarray, int, int]:
    """(returns (runs, episodes), wins (runs, episodes), invalid decisions, decisions) of one results row."""
    rets, wins, invalid, decisions = [], [], 0, 0
    for run in row["runs"]:
        rets.append([r for st in run for r in st["returns"]])
        wins.append([w for st in run for w in st["wins"]])
        invalid += sum(st["unparseable"] + st["illegal"] for st in run)
        decisions += sum(st["decisions"] for st in run)
    return np.array(rets, dtype=float), np.array(wins, dtype=float), invalid, decisions


def _ci(t: tuple[float, float, float], digits: int = 2) -> str:
    return f"{t[0]:.{digits}f} [{t[1]:.{digits}f}, {t[2]:.{digits}f}]"


def results_markdown(results: list[dict[str, Any]], cfg: Any) -> str:
    """Markdown report of the evaluation `results` under the run config `cfg`."""
    reps = cfg.eval.bootstrap_reps
    lines = [
        f"Environments {', '.join(f'`{e}`' for e in cfg.envs())}; training seeds {list(cfg.train_seeds)}; "
        f"{cfg.eval.episodes * len(cfg.eval.seeds)} evaluation episodes per trained model (the same start "
        "states for every model). Team return: IQM over runs x episodes with a 95% stratified-bootstrap "
        "interval (rliable); win and invalid-action rates: pooled, 95% Wilson intervals.",
        "",
        "| scenario | method | decoding | runs x episodes | team return IQM [95% CI] | mean return | "
        "win rate [95% CI] | invalid-action rate [95% CI] |",
        "|---|---|---|---|---|---|---|---|",
    ]
    arrays = {}
    for r in results:
        ret, win, inv, dec = row_arrays(r)
        arrays[(r["scenario"], r["method"], r["decoding"])] = ret
        s = summary(ret, win, inv, dec, reps)
        lines.append(
            f"| {r['scenario']}{' (zero-shot)' if r['zero_shot'] else ''} | {r['method']} | {r['decoding']} | "
            f"{s['runs']} x {s['episodes_per_run']} | {_ci(s['return_iqm'], 3)} | {s['return_mean']:.3f} | "
            f"{_ci(s['win_rate'])} | {_ci(s['invalid_rate'], 3)} ({inv} / {dec}) |"
        )
    lines += [
        "",
        "Probability of improvement P(DLM > baseline) on team return (rliable; ties count half), 95% "
        "bootstrap interval; DLM with legal-constrained decoding against baselines with legal-action masking. "
        "Verdict: wins / loses when the whole interval is above / below 0.5, else ties.",
        "",
        "| scenario | DLM | baseline | P(DLM > baseline) [95% CI] | verdict |",
        "|---|---|---|---|---|",
    ]
    for r in results:
        if r["method"] in DLM_METHODS or r["decoding"] == "free" or r["method"].startswith("Scripted"):
            continue
        for dlm in DLM_METHODS:
            x = arrays.get((r["scenario"], dlm, "legal-constrained"))
            if x is None:
                continue
            y = arrays[(r["scenario"], r["method"], r["decoding"])]
            k = min(x.shape[1], y.shape[1])  # episode k starts from the same state for every method
            poi = probability_of_improvement(x[:, :k], y[:, :k], reps)
            scen = f"{r['scenario']}{' (zero-shot)' if r['zero_shot'] else ''}"
            lines.append(f"| {scen} | {dlm} | {r['method']} | {_ci(poi)} | {verdict(poi)} |")
    for scen in dict.fromkeys(r["scenario"] for r in results):  # what GRPO adds over its SFT start
        x, y = (arrays.get((scen, m, "legal-constrained")) for m in DLM_METHODS[::-1])
        if x is not None and y is not None:
            k = min(x.shape[1], y.shape[1])
            poi = probability_of_improvement(x[:, :k], y[:, :k], reps)
            lines.append(f"| {scen} | DLM-GRPO | DLM-SFT | {_ci(poi)} | {verdict(poi)} |")
    return "\n".join(lines) + "\n"


def merge_results(parts: list[list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """One results list from evaluations of disjoint training seeds (same preset, same evaluation start
    states): each trained method's runs are concatenated; a method that is not trained per seed (the
    scripted expert, the prompted LM) keeps the first part's run, since every part evaluates the same one.
    Rows must match part by part (scenario, method, decoding), else `ValueError` names the first mismatch."""
    key = lambda r: (r["scenario"], r["zero_shot"], r["method"], r["decoding"])  # noqa: E731
    first = parts[0]
    for part in parts[1:]:
        if [key(r) for r in part] != [key(r) for r in first]:
            # zip_longest: a part that is a prefix of the first differs where it ends (None)
            bad = next((a, b) for a, b in zip_longest(map(key, first), map(key, part)) if a != b)
            raise ValueError(f"results to merge list different rows (first difference: {bad})")
    merged = []
    for rows in zip(*parts):
        fixed = rows[0]["method"].startswith(("Scripted", "Prompted"))
        runs = list(rows[0]["runs"]) if fixed else [run for r in rows for run in r["runs"]]
        merged.append({**rows[0], "runs": runs, "seconds": sum(r["seconds"] for r in rows)})
    return merged
