"""bench/data/make_mc_offline.py on a few hand-written requests: the rows it writes load as ARC items."""

import gzip
import json

import pytest

from bench.data.make_mc_offline import rows_from_requests
from eval.tasks import load_task


def _requests(docs: list[dict]) -> bytes:
    """An OLMES-style requests file: one request per option, plus the unconditioned copies."""
    lines = []
    for doc_id, doc in enumerate(docs):
        for offset in (0, 1_000_000):
            for i, choice in enumerate(doc["choices"]):
                lines.append(
                    {
                        "doc_id": doc_id + offset,
                        "idx": i,
                        "doc": doc,
                        "request": {"continuation": " " + choice},
                    }
                )
    return gzip.compress("".join(json.dumps(x) + "\n" for x in reversed(lines)).encode())


DOCS = [
    {"id": "q1", "query": "Question: Which is a metal?\nAnswer:", "choices": ["wood", "iron", "glass"], "gold": 1},
    {"id": "q2", "query": "Question: What melts ice?\nAnswer:", "choices": ["heat", "cold", "dark", "salt", "wind"], "gold": 0},
    {"id": "q3", "query": "Question: Plants need\nAnswer:", "choices": ["light", "rocks", "oil", "plastic"], "gold": 3},
]  # fmt: skip


def test_rows_keep_order_and_become_arc_items(tmp_path):
    rows = rows_from_requests(_requests(DOCS))
    assert [r["id"] for r in rows] == ["q1", "q2", "q3"]
    assert rows[0] == {
        "id": "q1",
        "question": "Which is a metal?",
        "choices": ["wood", "iron", "glass"],
        "answer": "B",
    }
    path = tmp_path / "arc.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    task = load_task("arc_challenge", data=str(path))
    assert [(i.id, i.gold, len(i.choices)) for i in task.items] == [
        ("q1", "B", 3),
        ("q2", "A", 5),
        ("q3", "D", 4),
    ]
    assert task.items[0].question.endswith("A. wood\nB. iron\nC. glass")


def test_bad_gold_or_layout_is_refused():
    with pytest.raises(ValueError, match="out of range"):
        rows_from_requests(_requests([{**DOCS[0], "gold": 3}]))
    with pytest.raises(ValueError, match="query layout"):
        rows_from_requests(_requests([{**DOCS[0], "query": "Which is a metal?"}]))
