"""Bad inputs end as `error: <what>. <fix>` with exit status 2: never a traceback, nothing written.

The table in docs/cli-errors.md is this test's output (regenerate: LATENTWORKS_WRITE_ERROR_TABLE=1
python -m pytest tests/test_bad_inputs.py); the test fails when the table and the messages drift apart.
"""

import importlib.util
import os
import shlex
from pathlib import Path

import pytest

from latentworks.cli import main

ROOT = Path(__file__).resolve().parents[1]
TABLE = ROOT / "docs" / "cli-errors.md"
NO_VLLM = importlib.util.find_spec("vllm") is None

# A "billion laughs" YAML: nine levels of nine aliases, 9**9 values once expanded, 800 bytes on disk.
_BOMB = "l0: &l0 [x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"l{k}: &l{k} [{', '.join([f'*l{k - 1}'] * 9)}]\n" for k in range(1, 10)
)
FILES = {
    "broken.yaml": "limit: [1, 2\n",
    "list.yaml": "- 1\n- 2\n",
    "cycle.yaml": "agents:\n  - {name: a, role: planner}\n  - {name: b, role: judger}\n"
    "edges:\n  - {src: a, dst: b}\n  - {src: b, dst: a}\n",
    "poet.yaml": "agents:\n  - {name: poet, role: poet}\n",
    "extra-key.yaml": "agents:\n  - {name: a, role: planner, user_template: 'x'}\n",
    "prompts-broken.yaml": "system: [unclosed\n",
    "prompts-list.yaml": "- just a list\n",
    "items.jsonl": '{"question": "1+1", "answer": "2"}\n',
    "empty/.keep": "",
    "afile.txt": "not a directory\n",
    "garbage-run/results.jsonl": "garbage\n[1, 2]\n",
    "orphan-run/results.jsonl": '{"item_id": "arith-0-0", "method": "single"}\n',
    "cut-run/manifest.json": '{\n  "identity": {\n    "model": "builtin:ari',
    "cut-run/results.jsonl": "",
    "deep.yaml": "limit: " + "[" * 5_000 + "]" * 5_000 + "\n",
    "deep.json": "[" * 100_000 + "]" * 100_000,
    "deep-items.jsonl": '{"question": "1+1", "answer": "2"}\n' + "[" * 100_000 + "]" * 100_000 + "\n",
    "bigint-items.jsonl": '{"question": "1+1", "answer": ' + "9" * 5_000 + "}\n",
    "deep-run/manifest.json": '{"identity": ' + "[" * 100_000 + "]" * 100_000 + "}",
    "deep-run/results.jsonl": "",
    "retyped-run/manifest.json": '{"identity": {"model": "builtin:arith-mini"}, "run_id": 123}',
    "retyped-run/results.jsonl": "",
    "bomb.yaml": _BOMB,
    "bomb-graph.yaml": "agents:\n  - {name: a, role: judger}\n" + _BOMB,
    "huge-graph.yaml": "agents:\n"
    + "".join(f"  - {{name: a{i}, role: {'judger' if i == 1999 else 'planner'}}}\n" for i in range(2000))
    + "edges:\n"
    + "".join(f"  - {{src: a{i}, dst: a{i + 1}}}\n" for i in range(1999)),
    "huge-question.jsonl": '{"question": "' + "x" * 200_000 + '", "answer": "2"}\n',
}
# Files that are not UTF-8 (Latin-1 bytes where a name should be).
BINARY_FILES = {
    "latin1.yaml": b"agents:\n  - {name: caf\xe9, role: planner}\n",
    "latin1.jsonl": b'{"question": "caf\xe9", "answer": "2"}\n',
}

# (argv, volatile): a volatile message depends on the machine (GPUs, extras) and is compared up to "("
CASES = [
    (["nosuch"], False),
    (["--nosuch"], False),
    (["eval", "--max-new-tokens", "0"], False),
    (["eval", "--limit", "0"], False),
    (["eval", "--limit", "abc"], False),
    (["eval", "--methods", "single,debate"], False),
    (["eval", "--task", "nope"], False),
    (["eval", "--task", "arith", "--data", "items.jsonl"], False),
    (["eval", "--task", "rg:chain_sum", "--data", "items.jsonl"], False),
    (["eval", "--task", "gsm8k", "--data", "missing.jsonl"], False),
    (["eval", "--dtype", "float8"], False),
    (["eval", "--device", "tpu"], False),
    (["eval", "--device", "cuda:99", "--limit", "1"], True),
    (["eval", "--graph", "nosuch"], False),
    (["eval", "--graph", "broken.yaml"], False),
    (["eval", "--graph", "cycle.yaml"], False),
    (["eval", "--graph", "poet.yaml"], False),
    (["eval", "--graph", "extra-key.yaml"], False),
    (["eval", "--prompts", "nosuch"], False),
    (["eval", "--prompts", "prompts-broken.yaml"], False),
    (["eval", "--prompts", "prompts-list.yaml"], False),
    (["eval", "--model", "./no/such", "--limit", "1"], False),
    (["eval", "--model", "builtin:nosuch", "--limit", "1"], False),
    (["eval", "--batch-size", "0"], False),
    (["eval", "--latent-steps", "-1"], False),
    (["eval", "--do-sample", "--temperature", "0"], False),
    (["eval", "--top-p", "1.5"], False),
    (["eval", "--backend", "tpu"], False),
    (["eval", "--inspect-latents", "-1"], False),
    (["eval", "--threads", "0"], False),
    (["eval", "--resume"], False),
    (["eval", "--resume", "--overwrite", "--out", "r"], False),
    (["eval", "--set", "run.latent_steps=abc"], False),
    (["eval", "--set", "nosuch=1"], False),
    (["eval", "--set", "novalue"], False),
    (["eval", "--config", "missing.yaml"], False),
    (["eval", "--config", "broken.yaml"], False),
    (["eval", "--config", "list.yaml"], False),
    (["eval", "--limit", "1000000000000"], False),
    (["eval", "--limit", "-5"], False),
    (["eval", "--limit", "1e3"], False),
    (["eval", "--do-sample", "--temperature", "nan"], False),
    (["eval", "--do-sample", "--temperature", "inf"], False),
    (["eval", "--do-sample", "--temperature", "-1"], False),
    (["eval", "--temperature", "nan"], False),
    (["eval", "--top-p", "nan"], False),
    (["eval", "--top-p", "0"], False),
    (["eval", "--max-new-tokens", str(10**30)], False),
    (["eval", "--max-new-tokens", "-5"], False),
    (["eval", "--latent-steps", "1000000000"], False),
    (["eval", "--batch-size", "-3"], False),
    (["eval", "--threads", "1000000000"], True),
    (["eval", "--threads", "-1"], False),
    (["eval", "--seed", "abc"], False),
    (["eval", "--methods", "single,single"], False),
    (["eval", "--inspect-latents", "1000000000000"], False),
    (["eval", "--config", "deep.yaml"], False),
    (["eval", "--graph", "deep.json"], False),
    (["eval", "--prompts", "deep.json"], False),
    (["eval", "--task", "gsm8k", "--data", "deep-items.jsonl", "--limit", "1"], False),
    (["eval", "--task", "gsm8k", "--data", "bigint-items.jsonl", "--limit", "1"], False),
    (["eval", "--config", "bomb.yaml"], False),
    (["eval", "--graph", "bomb-graph.yaml"], False),
    (["eval", "--graph", "huge-graph.yaml"], False),
    (["eval", "--task", "gsm8k", "--data", "huge-question.jsonl"], False),
    (["eval", "--resume", "--out", "deep-run"], False),
    (["eval", "--resume", "--out", "retyped-run"], False),
    (["report", "deep-run"], False),
    (["report", "retyped-run"], False),
    (["eval", "--model", ""], False),
    (["eval", "--out", ""], False),
    (["eval", "--out", " "], False),
    (["eval", "--out", "afile.txt"], False),
    (["eval", "--out", "afile.txt/sub"], False),
    (["eval", "--resume", "--out", "missing-run"], False),
    (["eval", "--resume", "--out", "empty"], False),
    (["eval", "--resume", "--out", "cut-run"], False),
    (["eval", "--resume", "--out", "orphan-run"], False),
    (["eval", "--out", "orphan-run"], False),
    (["eval", "--graph", "latin1.yaml"], False),
    (["eval", "--graph", "empty"], False),
    (["eval", "--prompts", "latin1.yaml"], False),
    (["eval", "--config", "latin1.yaml"], False),
    (["eval", "--config", "empty"], False),
    (["eval", "--task", "gsm8k", "--data", "latin1.jsonl"], False),
    (["eval", "--task", "gsm8k", "--data", "empty"], False),
    (["eval", "--set", "run.temperature=nan", "--do-sample"], False),
    (["eval", "--set", "run.threads=-2"], False),
    (["eval", "--set", "run.nosuch=1"], False),
    *([(["eval", "--backend", "vllm", "--limit", "1"], False)] if NO_VLLM else []),
    (["demo", "--limit", "0"], False),
    (["demo", "--max-new-tokens", "0"], False),
    (["demo", "--model", "./no/such"], False),
    (["demo", "--threads", "1000000000"], True),
    (["dlm", "nosuch"], False),
    (["dlm", "all", "--config", "nosuch"], False),
    (["dlm", "sft", "--set", "sft.epochs=abc"], False),
    (["dlm", "sft", "--set", "sft.epoch=2"], False),
    (["dlm", "data", "--set", "data.env=smac"], False),
    (["dlm", "eval", "--run-dir", "runs/fresh"], False),
    (["dlm", "grpo", "--run-dir", "runs/fresh"], False),
    (["dlm", "data", "--threads", "0"], False),
    (["probe", "e9"], False),
    (["probe", "e1", "--n", "1"], False),
    (["probe", "e1", "--template", "huge"], False),
    (["probe", "e1", "--requests", "missing.txt"], False),
    (["probe", "e1", "--alphas", "abc"], False),
    (["probe", "e1", "--model", "./no/such"], False),
    (["smoke", "--steps", "0"], False),
    (["smoke", "--model", "./no/such"], False),
    (["report", "empty"], False),
    (["report", "no-such-dir"], False),
    (["report", "garbage-run"], False),
    (["report", "cut-run"], False),
    (["report", "afile.txt"], False),
    (["family", "nosuch"], False),
    (["models", "--nosuch"], False),
    (["models", "pull"], False),
    (["models", "pull", "nosuch"], False),
    (["finetune"], False),
    (["finetune", "nosuch"], False),
    (["finetune", "builtin", "--nosuch"], False),
    (["finetune", "builtin", "--max-steps", "0", "--out-dir", "ft"], False),
    (["finetune", "builtin", "--config", "list.yaml"], False),
    (["finetune", "mas", "--aligner", "conv", "--out-dir", "ft"], False),
    (["finetune", "mas", "--set", "latent_stepz=3"], False),
]


def _label(argv: list[str]) -> str:
    return shlex.join(["latentworks", *argv])  # an empty argument shows as ''


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    d = tmp_path_factory.mktemp("bad-inputs")
    for name, text in FILES.items():
        (d / name).parent.mkdir(parents=True, exist_ok=True)
        (d / name).write_text(text)
    for name, data in BINARY_FILES.items():
        (d / name).write_bytes(data)
    return d


def _message(err: str) -> str:
    """The error text on one line (a multi-problem error lists each problem)."""
    lines = [ln.strip() for ln in err.strip().splitlines() if ln.strip()]
    start = next((i for i, ln in enumerate(lines) if "error:" in ln), 0)
    return " ".join(lines[start:])


@pytest.fixture(scope="module")
def outcomes(workdir):
    """argv label -> (exit status, stderr, files the command created)."""
    return {}


@pytest.mark.parametrize("argv, volatile", CASES, ids=[_label(a) for a, _ in CASES])
def test_bad_input_is_a_clean_error(argv, volatile, workdir, outcomes, monkeypatch, capsys):
    monkeypatch.chdir(workdir)
    before = {p for p in workdir.rglob("*")}
    rc = main(argv)
    err = capsys.readouterr().err
    created = sorted(str(p.relative_to(workdir)) for p in set(workdir.rglob("*")) - before)
    outcomes[_label(argv)] = (rc, _message(err), volatile)
    assert rc == 2, err
    assert "Traceback" not in err
    assert "error: " in err
    assert not created, f"wrote {created} before failing"


def test_error_table_matches_the_messages(outcomes):
    """docs/cli-errors.md lists every case with the message it gives (at least 110 of them)."""
    if len(outcomes) != len(CASES):
        pytest.skip("needs every case above in the same session (run the whole file)")
    rows = ["| command | message |", "|---|---|"]
    for label, (_, message, _) in outcomes.items():
        rows.append(f"| `{label}` | {message.replace('|', '/')} |")
    table = "\n".join(rows) + "\n"
    head = "# Command-line errors\n\nEach bad input below exits with status 2 and prints one `error:` line (produced by\n"
    head += "`tests/test_bad_inputs.py`, which fails when a message here drifts).\n\n"
    if os.environ.get("LATENTWORKS_WRITE_ERROR_TABLE"):
        TABLE.parent.mkdir(exist_ok=True)
        TABLE.write_text(head + table)
    assert len(outcomes) >= 110
    written = TABLE.read_text()
    for label, (_, message, volatile) in outcomes.items():
        line = next((ln for ln in written.splitlines() if ln.startswith(f"| `{label}` |")), None)
        assert line is not None, f"{label} missing from {TABLE.name}"
        expected = message.replace("|", "/")
        if volatile:
            expected = expected.split("(")[0]
        assert expected in line, f"{label}: table says {line!r}, command says {message!r}"
