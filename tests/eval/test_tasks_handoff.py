"""The hand-off task: generator levels, train/test disjointness, the file schema, `load_task`."""

import json
import re

import pytest

from eval.tasks import handoff as th
from eval.tasks import load_task


def _numbers(it):
    return {int(x) for s in it.shares for x in re.findall(r"\d+", s)}


def _names(it, names):
    text = " ".join(it.shares) + " " + it.question
    return {n for n in names if re.search(rf"\b{n}\b", text)}


@pytest.mark.parametrize("level", th.LEVELS)
def test_train_and_test_are_disjoint_by_value_and_by_name(level):
    train = th.make_items(level, 2000, "train", seed=0)
    test = th.make_items(level, 500, "test", seed=0)
    all_names = th.TRAIN_NAMES + th.TEST_NAMES
    assert not set(th.TRAIN_NAMES) & set(th.TEST_NAMES)
    train_vals = set().union(*(_numbers(it) for it in train))
    test_vals = set().union(*(_numbers(it) for it in test))
    assert train_vals and test_vals and not train_vals & test_vals
    train_names = set().union(*(_names(it, all_names) for it in train))
    test_names = set().union(*(_names(it, all_names) for it in test))
    assert train_names <= set(th.TRAIN_NAMES) and test_names <= set(th.TEST_NAMES)
    # every digit appears in both places in both splits (the split is not "unseen digits")
    for vals in (train_vals, test_vals):
        assert {v % 10 for v in vals} == set(range(10)) or level == "sum"


def test_levels_have_the_documented_shape():
    (relay,) = th.make_items("relay", 1, seed=1)
    assert len(relay.shares) == 1 and relay.answer in relay.shares[0]
    for it in th.make_items("pick", 50, seed=1):
        a, b = (sorted(_numbers(th.HandoffItem("", [s], "", ""))) for s in it.shares)
        assert a != b and int(it.answer) in a + b
    for it in th.make_items("sum", 50, seed=1):
        assert int(it.answer) == sum(_numbers(th.HandoffItem("", [s], "", "")).pop() for s in it.shares)


def test_generator_is_seeded():
    assert th.make_items("mixed", 9, seed=4) == th.make_items("mixed", 9, seed=4)
    assert th.make_items("mixed", 9, seed=4) != th.make_items("mixed", 9, seed=5)


def test_file_in_the_schema_loads_as_a_task(tmp_path):
    f = tmp_path / "h.jsonl"
    rows = [{"id": "a", "shares": ["x is 4.", "y is 5."], "question": "x?", "answer": "4"}]
    f.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    task = load_task("handoff", data=str(f))
    assert task.items[0].meta["shares"] == ["x is 4.", "y is 5."] and task.items[0].gold == "4"
    gen = load_task("handoff:sum", limit=5)
    assert len(gen.items) == 5 and all(len(it.meta["shares"]) == 2 for it in gen.items)


@pytest.mark.parametrize(
    ("row", "field"),
    [
        ({"id": "a", "shares": [], "question": "q", "answer": "1"}, "shares"),
        ({"id": "a", "shares": ["s"], "question": "", "answer": "1"}, "question"),
        ({"id": "a", "shares": ["s", 3], "question": "q", "answer": "1"}, "shares"),
        ({"shares": ["s"], "question": "q", "answer": "1"}, "id"),
    ],
)
def test_bad_rows_name_the_line_and_field(tmp_path, row, field):
    f = tmp_path / "h.jsonl"
    f.write_text(json.dumps(row) + "\n")
    with pytest.raises(ValueError, match=rf"line 1: field `{field}`"):
        th.read_items(f)


def test_eval_runs_the_handoff_task_with_per_item_graphs(model_dir, tmp_path):
    """`--task handoff --data FILE`: items with one and two shares run on their own holder graphs."""
    from agents.config import RunConfig
    from eval.runner import EvalConfig, evaluate

    f = tmp_path / "h.jsonl"
    rows = [
        {"id": "one", "shares": ["Zoe's code is 48."], "question": "What is Zoe's code?", "answer": "48"},
        {
            "id": "two",
            "shares": ["Zoe's code is 48.", "Kate's code is 13."],
            "question": "Kate?",
            "answer": "13",
        },
    ]
    f.write_text("".join(json.dumps(r) + "\n" for r in rows))
    run = RunConfig(latent_steps=1, max_new_tokens=2, batch_size=2, threads=1)
    cfg = EvalConfig(model=model_dir, task="handoff", data=str(f), methods=["latent_mas"], run=run,
                     out=str(tmp_path / "out"), progress=False)  # fmt: skip
    out = evaluate(cfg)
    recs = [json.loads(x) for x in (out / "results.jsonl").read_text().splitlines()]
    graphs = {r["item_id"]: r["item_graph"] for r in recs}
    assert graphs == {"one": "handoff1-kv", "two": "handoff2-kv"}
    agents_of = {r["item_id"]: [a["name"] for a in r["agents"]] for r in recs}
    assert agents_of["two"] == ["holder_0", "holder_1", "answerer"]
