"""bench/speed/vs_official.py refuses to run without a checkout of the official code, with a message that
says how to get one, before loading anything; its flags are checked first; under `--prompts own` the
official side's answer is extracted by the official rules and judged by the project's scorer."""

import importlib.util
import os
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench" / "speed"


def _load(name):
    spec = importlib.util.spec_from_file_location(name, BENCH / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod  # dataclasses look their module up while the file runs
    spec.loader.exec_module(mod)
    return mod


def test_skipped_with_a_clear_message_without_official(capsys):
    assert _load("vs_official").main([]) == 2
    err = capsys.readouterr().err
    assert "skipped" in err and "--official DIR" in err


def test_a_folder_that_is_not_a_checkout_is_named(tmp_path):
    (tmp_path / "models.py").write_text("")
    with pytest.raises(ValueError, match="missing methods/latent_mas.py"):
        _load("official_adapter").check_official_dir(str(tmp_path))


def test_work_ceiling_counts_padded_rows_and_the_lm_head_against_real_tokens():
    import torch

    official = torch.ones((2, 10), dtype=torch.long)  # right padding: every row read to the longest
    ours = torch.tensor([[0] * 6 + [1] * 4, [1] * 10])  # real tokens 4 + 10
    # official (10 + 2 steps) x 2 rows x 1.5 (LM head) = 36; ours 14 + 2 steps x 2 rows = 18
    assert _load("vs_official").work_ceiling(official, ours, 2, {"ceiling": 1.5}) == pytest.approx(2.0)


def test_shared_weights_copy_shares_tensors_and_resizes_alone(tmp_path):
    """The official loader under `shared_weights` returns a module copy whose weights are our tensors;
    resizing its embedding table (as the official code does) leaves our model untouched."""
    import types

    from latent import load_model
    from latent.testing import tiny_model

    tiny_model("llama", tmp_path, hidden_size=32)
    m = load_model(str(tmp_path), device="cpu")
    real = object()
    off = types.SimpleNamespace(models=types.SimpleNamespace(AutoModelForCausalLM=real))
    with _load("official_adapter").shared_weights(off, m.model):
        copy = off.models.AutoModelForCausalLM.from_pretrained(str(tmp_path), torch_dtype=None)
    assert off.models.AutoModelForCausalLM is real  # the loader is restored on exit
    assert copy is not m.model and copy.config is not m.model.config
    ours = dict(m.model.named_parameters())
    assert all(p.data_ptr() == ours[n].data_ptr() for n, p in copy.named_parameters())
    rows = m.model.get_input_embeddings().weight.shape[0]
    copy.resize_token_embeddings(rows - 3)
    assert m.model.get_input_embeddings().weight.shape[0] == rows


def test_one_solve_is_the_aligner_it_is_bound_to():
    """`OneSolve` (ours under --shared-solve) calls and reads the aligner it is bound to."""
    import torch

    from latent.realign import Realigner

    one = _load("vs_official").OneSolve()
    one.aligner = Realigner(matrix=torch.eye(4) * 2, target_norm=3.0)
    h = torch.randn(2, 4)
    assert torch.equal(one(h), one.aligner(h)) and one.target_norm == 3.0


# --------------------------------------------------------------------------- --task / --prompts

OFFICIAL = os.environ.get("LATENTMAS_OFFICIAL")  # a checkout of the official code, for the tests that read it
NEEDS_OFFICIAL = pytest.mark.skipif(
    not (OFFICIAL and (Path(OFFICIAL) / "data.py").is_file()),
    reason="needs a checkout of the official LatentMAS code: set LATENTMAS_OFFICIAL=DIR",
)


@pytest.mark.parametrize(("flag", "value"), [("--task", "mbpp"), ("--prompts", "theirs")])
def test_unknown_task_or_prompts_is_rejected_before_anything_loads(capsys, flag, value):
    assert _load("vs_official").main([flag, value, "--official", "/nonexistent"]) == 2
    err = capsys.readouterr().err
    assert f"argument {flag}: invalid choice: '{value}'" in err and "skipped" not in err


def test_own_prompts_refuse_a_model_the_official_prompts_reject(capsys):
    """The official prompts assert a Qwen model: said at once, before the checkout is even looked for."""
    assert _load("vs_official").main(["--prompts", "own", "--model", "smollm2-135m-instruct"]) == 2
    err = capsys.readouterr().err
    assert "--prompts own" in err and "Qwen" in err and "skipped" not in err


def test_official_answer_follows_the_official_extraction_rules():
    answer = _load("vs_official").official_answer
    assert answer(r"so \boxed{1,234} apples", "math") == "1"  # the first number inside the last box
    assert answer(r"\boxed{7} then \boxed{\frac{1}{2}}", "math") == "1"  # the box ends at its first }
    assert answer(r"\boxed{ Yes }", "math") == "yes"  # no number: the content, stripped, lower-cased
    assert answer("The answer is 18. Check: 18 - 3 = 15", "math") == "15"  # no box: the last number
    assert answer("no number here", "math") is None
    code = "```python\ndef f():\n    return 1\n```\ntext\n```PYTHON\ndef g():\n    return 2\n```"
    assert answer(code, "code") == "def g():\n    return 2"  # the last python fence, any case
    assert answer("```\ndef f():\n    return 1\n```", "code") is None  # an untagged fence is not read


def test_official_verdict_is_the_projects_score_of_the_official_extraction(monkeypatch):
    import eval.scoring
    from eval.tasks import Item

    vs = _load("vs_official")
    item = Item("q1", "How many?", "18", "math")
    text = "The answer is 18. Check: 18 - 3 = 15"
    assert eval.scoring.score(item, text).correct  # the project's extraction reads the answer phrase
    assert not vs.official_verdict(item, text).correct  # the official code takes the last number, 15
    assert vs.official_verdict(item, r"so \boxed{18}.").correct
    assert not vs.official_verdict(item, "nothing").correct

    seen = []
    monkeypatch.setattr(eval.scoring, "score", lambda it, t: seen.append((it, t)) or "verdict")
    assert vs.official_verdict(item, text) == "verdict" and seen == [(item, r"\boxed{15}")]


def test_official_verdict_judges_code_in_the_projects_sandbox():
    """A trivially right and a trivially wrong function, each in a python fence; an untagged fence (which
    the project's own extraction would read) is nothing to the official extraction."""
    from eval.scoring import score
    from eval.tasks import Item

    prompt = 'def add(a: int, b: int) -> int:\n    """The sum of a and b."""\n'
    tests = "def check(candidate):\n    assert candidate(2, 3) == 5\n    assert candidate(-1, 1) == 0\n\ncheck(add)\n"
    item = Item("HumanEval/x", prompt, "", "code", tests=tests, entry_point="add", meta={"prompt": prompt})
    verdict = _load("vs_official").official_verdict
    right = "Here it is:\n```python\ndef add(a, b):\n    return a + b\n```\nDone."
    wrong = "```python\ndef add(a, b):\n    return a - b\n```"
    untagged = "```\ndef add(a, b):\n    return a + b\n```"
    assert verdict(item, right).correct
    assert not verdict(item, wrong).correct
    assert score(item, untagged).correct and not verdict(item, untagged).correct


def test_the_official_code_runner_is_disarmed():
    """The official method's `run_with_timeout` (an exec of the model's code) is replaced by a stub that
    runs nothing."""
    import types

    def real(code, timeout):
        raise AssertionError("the official runner ran")

    off = types.SimpleNamespace(latent_mas=types.SimpleNamespace(run_with_timeout=real))
    _load("vs_official").disarm_official_exec(off)
    ok, why = off.latent_mas.run_with_timeout("raise SystemExit(3)", 10)
    assert ok is False and "sandbox" in why


@NEEDS_OFFICIAL
def test_official_questions_come_from_the_official_loader():
    from eval.tasks import Item

    vs = _load("vs_official")
    root = Path(OFFICIAL).resolve()
    prompt = "def add(a, b):\n    pass\n"
    code = Item("HumanEval/x", prompt, "", "code", tests="check(add)\n", entry_point="add")
    (q,) = vs.official_questions(root, [code], "humaneval")
    assert prompt in q and "```python" in q and q != prompt
    math = Item("q1", "  How many apples?\n", "3", "math")
    assert vs.official_questions(root, [math], "gsm") == ["How many apples?"]


class _FakeOfficial:
    """Stands in for the official modules in the end-to-end loop: its method answers each row with a fixed
    text and counts how many rows it was asked (so a resumed run that reran a chunk is seen)."""

    def __init__(self, fail: bool = False):
        import types

        self.rows = 0
        fake = self

        class Method:
            def __init__(self, *args, **kwargs):
                pass

            def run_batch(self, rows):
                if fail:
                    raise AssertionError("a stored chunk ran again")
                fake.rows += len(rows)
                return [{"raw_prediction": "\\boxed{3}"} for _ in rows]

        self.latent_mas = types.SimpleNamespace(LatentMASMethod=Method)
        self.wrapper = types.SimpleNamespace(
            model=types.SimpleNamespace(generate=None), tokenizer=types.SimpleNamespace(eos_token_id=0)
        )


def test_end_to_end_chunks_resume_from_their_log(llama, tmp_path):
    """Each finished chunk is stored as it ends; a resumed run reads the stored chunks (the official side is
    not asked again) and ends with the same texts, times and counts; more questions add only new chunks."""
    from eval.tasks import Item

    vs = _load("vs_official")
    items = [Item(f"q{i}", f"What is {i} + 1?", str(i + 1), "math") for i in range(4)]
    settings = {"model": "tiny", "dtype": "float32"}
    path = tmp_path / "run.json.chunks.jsonl"
    first = _FakeOfficial()
    kw = dict(batch=2, steps=1, max_new=4, task="gsm")
    a = vs.end_to_end(first, first.wrapper, llama, items[:2], log=vs.ChunkLog(path, settings, False), **kw)
    assert first.rows == 2 and len(path.read_text().splitlines()) == 2  # settings line + one chunk
    again = _FakeOfficial(fail=True)
    b = vs.end_to_end(again, again.wrapper, llama, items[:2], log=vs.ChunkLog(path, settings, True), **kw)
    assert {k: b[k] for k in a if k != "ratio"} == {k: a[k] for k in a if k != "ratio"}
    more = _FakeOfficial()
    c = vs.end_to_end(more, more.wrapper, llama, items, log=vs.ChunkLog(path, settings, True), **kw)
    assert more.rows == 2 and c["items"] == 4 and c["texts_ours"][:2] == a["texts_ours"]


def test_a_chunk_log_refuses_what_it_cannot_resume_and_skips_a_torn_line(tmp_path):
    from chunk_log import ChunkLog, ChunkLogError

    path = tmp_path / "c.jsonl"
    log = ChunkLog(path, {"dtype": "float32"}, resume=False)
    assert not path.exists()  # nothing is written before a chunk ends
    log.add("a", {"x": 1})
    with pytest.raises(ChunkLogError, match="--resume"):
        ChunkLog(path, {"dtype": "float32"}, resume=False)
    with pytest.raises(ChunkLogError, match=r"other settings \(dtype\)"):
        ChunkLog(path, {"dtype": "bfloat16"}, resume=True)
    with path.open("a") as fh:
        fh.write('{"chunk": "b", "x"')  # killed mid-write
    assert set(ChunkLog(path, {"dtype": "float32"}, resume=True).done) == {"a"}


def test_resume_without_json_is_refused_before_anything_loads(capsys):
    assert _load("vs_official").main(["--resume", "--official", "/nonexistent"]) == 2
    assert "--json" in capsys.readouterr().err
