"""Answer-extraction accuracy on hand-labelled model outputs: ours vs math-verify vs lm-eval-harness.

The set (bench/data/extraction_set.jsonl) holds greedy SmolLM2-135M-Instruct outputs on math word
problems and multiple-choice questions (bench/studies/make_extraction_outputs.py), each labelled by hand
with the answer the text commits to (`label`, null when it commits to none) and the task's `gold`.

Two rates per extractor, with 95% Wilson intervals:
- extraction: the extracted answer equals the label (extracting nothing counts as right only when
  the label is null);
- verdict: "extracted == gold" agrees with "label == gold", i.e. the scorer marks an output right
  or wrong exactly as a careful reader would.
Extracted numbers are compared with the label after one shared number canonicalisation
(`eval.scoring.normalize_number`) for every extractor; letters are compared upper-cased.

lm-eval-harness is used through its own filter classes with the regexes of its `gsm8k-cot` task
(strict: "The answer is N."; flexible: last number) and its `gpqa` CoT task (strict: "The answer
is X"; flexible: `multi_choice_regex`). It is imported from LM_EVAL_PATH (default
/work/venvs/scoring-lmeval, installed with `pip install --target DIR --no-deps lm-eval`).

Run: `nice python bench/studies/extraction_accuracy.py`.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

from eval.report import wilson
from eval.scoring import extract_choice, extract_math_answer, normalize_number
from latent.args import add_config_arguments, config_from_args, run_script

DATA = Path(__file__).parents[1] / "data" / "extraction_set.jsonl"


def _same_number(extracted: str | None, target: str | None) -> bool:
    if target is None or extracted is None:
        return extracted is None and target is None
    a, b = normalize_number(extracted), normalize_number(target)
    return a is not None and a == b


def ours(row: dict) -> str | None:
    if row["kind"] == "math":
        return extract_math_answer(row["output"])[0]
    return extract_choice(row["output"], row["choices"])


def ours_without_late_rules(row: dict) -> str | None:
    """Ours without the two rules added after reading this set's errors (cut-off text, last sentence)."""
    from eval.scoring import extract_boxed
    from eval.scoring.choice_extraction import extract_choice as choice

    if row["kind"] == "math":
        return extract_math_answer(row["output"], last_number_when_cut_off=True)[0]
    return choice(row["output"], row["choices"], extract_boxed(row["output"]), sentence_fallback=False)


def math_verify_extract(row: dict) -> str | None:
    from math_verify import ExprExtractionConfig, LatexExtractionConfig, StringExtractionConfig, parse

    if row["kind"] == "math":
        got = parse(row["output"], extraction_config=[LatexExtractionConfig(), ExprExtractionConfig()])
    else:
        letters = tuple("ABCDEFGH"[: len(row["choices"])])
        got = parse(row["output"], extraction_config=[StringExtractionConfig(strings=letters)])
    return str(got[-1]) if got else None


def _lm_eval(row: dict, strict: bool) -> str | None:
    from lm_eval.filters.extraction import MultiChoiceRegexFilter, RegexFilter

    if row["kind"] == "math":
        if strict:
            f = RegexFilter(regex_pattern=r"The answer is (\-?[0-9\.\,]+).", group_select=0)
        else:
            f = RegexFilter(regex_pattern=r"(-?[$0-9.,]{2,})|(-?[0-9]+)", group_select=-1)
        out = f.apply([[row["output"]]], [{}])[0][0]
        if out == "[invalid]":
            return None
        return out.replace(",", "").replace("$", "").rstrip(".") or None
    if strict:
        f = RegexFilter(regex_pattern=r"(?<=The answer is )(.*)(?=.)", group_select=0)
    else:
        f = MultiChoiceRegexFilter(
            regex_pattern=r"(\([A-Z]\))", group_select=-1, ignore_case=True, ignore_punctuation=True
        )
    out = f.apply([[row["output"]]], [{"choices": row["choices"]}])[0][0]
    letter = out.strip().strip("()").strip() if isinstance(out, str) else ""
    return letter.upper() if len(letter) == 1 and letter.isalpha() else None


EXTRACTORS = {
    "ours": ours,
    "ours, without the 2 late rules": ours_without_late_rules,
    "math-verify": math_verify_extract,
    "lm-eval strict": lambda r: _lm_eval(r, strict=True),
    "lm-eval flexible": lambda r: _lm_eval(r, strict=False),
}


def evaluate(rows: list[dict], name: str) -> dict:
    fn = EXTRACTORS[name]
    out = {}
    for kind in ("math", "mc"):
        rs = [r for r in rows if r["kind"] == kind]
        ext_ok = verdict_ok = 0
        for r in rs:
            try:
                got = fn(r)
            except Exception:  # noqa: BLE001 - an extractor crash counts as extracting nothing
                got = None
            if kind == "math":
                ext = _same_number(got, r["label"])
                said_right = r["label"] is not None and _same_number(r["label"], r["gold"])
                judged_right = got is not None and _same_number(got, r["gold"])
            else:
                norm = got.upper() if got else None
                ext = norm == r["label"]
                said_right = r["label"] == r["gold"]
                judged_right = norm == r["gold"]
            ext_ok += ext
            verdict_ok += said_right == judged_right
        out[kind] = (ext_ok, verdict_ok, len(rs))
    return out


def _cell(k: int, n: int) -> str:
    lo, hi = wilson(k, n)
    return f"{k / n:.1%} ({lo:.0%}-{hi:.0%})"


@dataclass
class ExtractionBench:
    """Flags of the extraction-accuracy table."""

    data: str = field(default=str(DATA), metadata={"help": "labelled outputs (JSONL)"})
    lm_eval_path: str = field(
        default=os.environ.get("LM_EVAL_PATH", "/work/venvs/scoring-lmeval"),
        metadata={"help": "folder holding lm-eval (pip install --target DIR --no-deps lm-eval)"},
    )
    errors: bool = field(
        default=False, metadata={"switch": True, "help": "list where ours disagrees with the label"}
    )


def run(ns: argparse.Namespace) -> int:
    args = config_from_args(ExtractionBench, ns)
    sys.path.append(args.lm_eval_path)
    rows = [json.loads(line) for line in Path(args.data).read_text().splitlines() if line.strip()]
    n_math = sum(r["kind"] == "math" for r in rows)
    n_none = sum(r["label"] is None for r in rows)
    print(
        f"{len(rows)} labelled outputs ({n_math} math, {len(rows) - n_math} multiple choice; {n_none} commit to no answer)"
    )
    print()
    print("| extractor | math extraction | math verdict | MC extraction | MC verdict |")
    print("|---|---|---|---|---|")
    for name in EXTRACTORS:
        try:
            res = evaluate(rows, name)
        except ImportError as e:
            print(f"| {name} | not available: {e} | | | |")
            continue
        (me, mv, mn), (ce, cv, cn) = res["math"], res["mc"]
        print(f"| {name} | {_cell(me, mn)} | {_cell(mv, mn)} | {_cell(ce, cn)} | {_cell(cv, cn)} |")
    if args.errors:
        print()
        for r in rows:
            got = ours(r)
            same = _same_number(got, r["label"]) if r["kind"] == "math" else got == r["label"]
            if not same:
                print(f"{r['id']}: ours {got!r}, label {r['label']!r} ({r['note']})")

    return 0


def main(argv: list[str] | None = None) -> int:
    return run_script(
        "bench/studies/extraction_accuracy.py",
        __doc__,
        partial(add_config_arguments, cls=ExtractionBench),
        run,
        argv,
    )


if __name__ == "__main__":
    raise SystemExit(main())
