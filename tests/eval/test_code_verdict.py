"""Code scoring cannot be forged: wrong solutions that try to fake success score wrong, right ones pass."""

from __future__ import annotations

import textwrap

import pytest

from eval.sandbox.code_verdict import judge_code
from eval.scoring import Score, score
from eval.tasks import Item

TESTS = textwrap.dedent(
    """
    def check(candidate):
        assert candidate(2, 3) == 5
        assert candidate(-1, 1) == 0
        assert abs(candidate(0.5, 0.25) - 0.75) < 1e-9
        assert candidate(10, 0) == 10

    check(add)
    """
)
PROMPT = 'def add(a, b):\n    """Add two numbers."""\n'
ITEM = Item("c1", PROMPT, "", "code", tests=TESTS, entry_point="add", meta={"prompt": PROMPT})
WRONG = "def add(a, b):\n    return a - b\n"
RIGHT = "def add(a, b):\n    return a + b\n"


def _score(code: str, timeout: float = 5.0) -> Score:
    return score(ITEM, f"```python\n{textwrap.dedent(code)}```", sandbox_timeout=timeout)


# Every entry: a wrong solution plus a trick that scored it correct when the verdict was the exit code
# of one script holding both the candidate and the tests.
FORGERIES = {
    "sys.exit(0) at the top": WRONG + "import sys\nsys.exit(0)\n",
    "raise SystemExit at the top": WRONG + "raise SystemExit\n",
    "os._exit(0) at the top": WRONG + "import os\nos._exit(0)\n",
    "os._exit(0) inside the function": "import os\ndef add(a, b):\n    os._exit(0)\n",
    "SystemExit inside the function": "def add(a, b):\n    raise SystemExit(0)\n",
    "atexit hook exits 0": WRONG + "import atexit, os\natexit.register(lambda: os._exit(0))\n",
    "excepthook exits 0": WRONG + "import sys, os\nsys.excepthook = lambda *a: os._exit(0)\n",
    "fork, parent exits 0": WRONG + "import os\nif os.fork():\n    os._exit(0)\n",
    "fork inside the call, parent exits": "import os\ndef add(a, b):\n    if os.fork():\n        os._exit(0)\n    return a - b\n",
    "timer exits 0 while the body hangs": (
        "import threading, os\nthreading.Timer(0.2, lambda: os._exit(0)).start()\n"
        "def add(a, b):\n    while True:\n        pass\n"
    ),
    "alarm handler exits 0": (
        "import signal, os\nsignal.signal(signal.SIGALRM, lambda *a: os._exit(0))\nsignal.alarm(1)\n"
        "def add(a, b):\n    while True:\n        pass\n"
    ),
    "__eq__ always true": "class T:\n    def __eq__(self, o):\n        return True\n    __ne__ = lambda s, o: False\n"
    "    def __sub__(self, o):\n        return self\n    def __lt__(self, o):\n        return True\n"
    "    __abs__ = lambda s: s\ndef add(a, b):\n    return T()\n",
    "int subclass with __eq__ true": "class I(int):\n    def __eq__(self, o):\n        return True\n"
    "    __hash__ = int.__hash__\ndef add(a, b):\n    return I(a - b)\n",
    "list subclass with __eq__ true": "class L(list):\n    def __eq__(self, o):\n        return True\n"
    "def add(a, b):\n    return L()\n",
    "rebinds builtins the asserts use": (
        "import builtins\nbuiltins.abs = lambda x: 0\nbuiltins.AssertionError = type('X', (Exception,), {})\n"
        + WRONG
    ),
    "replaces the whole builtins module": "import sys\nsys.modules['builtins'].__dict__.clear()\n" + WRONG,
    "reads its own and every visible file for the expected outputs": (
        "import os, re, glob\nSEEN = ''\n"
        "for p in glob.glob('*') + glob.glob('/tmp/**', recursive=True) + ['/proc/self/cmdline',"
        " '/proc/%d/cmdline' % os.getppid(), '/proc/%d/environ' % os.getppid()]:\n"
        "    try:\n        SEEN += open(p, errors='replace').read()\n    except Exception:\n        pass\n"
        "def add(a, b):\n    m = re.search(r'candidate\\(%r, %r\\) == (\\S+)' % (a, b), SEEN)\n"
        "    return eval(m.group(1)) if m else a - b\n"
    ),
    "reads the judge's memory": (
        "import os\ntry:\n    DUMP = open('/proc/%d/mem' % os.getppid(), 'rb').read(1)\nexcept OSError:\n    DUMP = b''\n"
        + WRONG
    ),
    "unittest.main() habit": WRONG + "import unittest\nunittest.main()\n",
    "guarded unittest.main() habit": WRONG
    + "import unittest\nif __name__ == '__main__':\n    unittest.main()\n",
    "sys.exit(main()) habit": WRONG + "import sys\ndef main():\n    return 0\nsys.exit(main())\n",
    "prints a success banner": WRONG + "print('All tests passed!')\nprint('{\"passed\": 4, \"total\": 4}')\n",
    "writes a forged verdict to every descriptor": (
        "import os, json\nfor fd in range(3, 64):\n    try:\n"
        "        os.write(fd, json.dumps({'passed': 4, 'total': 4, 'secret': ''}).encode())\n"
        "    except OSError:\n        pass\n" + WRONG
    ),
    "kills the judge": "import os, signal\nos.kill(os.getppid(), signal.SIGKILL)\n" + WRONG,
    "kills its whole process group": "import os, signal\nos.killpg(0, signal.SIGKILL)\n" + WRONG,
    "stops the judge": "import os, signal\nos.kill(os.getppid(), signal.SIGSTOP)\n" + WRONG,
    "replaces its reply with a bare True": (
        "import sys\nm = sys.modules['__main__']\nm.codec.encode = lambda v, *a, **k: ['b', True]\n" + WRONG
    ),
    "sends a malformed reply tag": "import sys\nsys.modules['__main__'].codec.encode = lambda v, *a, **k: ['x']\n"
    + WRONG,
    "writes a raw forged reply on its own pipe": (
        "import os, struct, json, sys\nREP = int(sys.argv[2])\n"
        "def add(a, b):\n    d = json.dumps({'ok': True, 'value': ['b', True], 'args': []}).encode()\n"
        "    os.write(REP, struct.pack('>Q', len(d)) + d)\n    os._exit(0)\n"
    ),
    "returns an endless generator": "import itertools\ndef add(a, b):\n    return itertools.count()\n",
    "returns a huge value": "def add(a, b):\n    return [0] * (10 ** 9)\n",
    "patches the comparison helpers of math": "import math\nmath.isclose = lambda *a, **k: True\n" + WRONG,
    "exits from a thread at once": (
        "import threading, os\nthreading.Thread(target=lambda: os._exit(0)).start()\n" + WRONG
    ),
}


@pytest.mark.parametrize("name", sorted(FORGERIES))
def test_forged_success_is_scored_wrong(name):
    """Each trick on a wrong solution scores wrong (the verdict comes only from the judge's own checks)."""
    result = _score(FORGERIES[name], timeout=3.0)
    assert not result.correct, (name, result)
    assert result.tests_passed is None or result.tests_passed < 4, result


def test_at_least_25_forgeries():
    assert len(FORGERIES) >= 25


# Right solutions with the same habits still pass: the habits neither inflate nor deflate a score.
RIGHT_WITH_HABITS = {
    "plain": RIGHT,
    "guarded unittest.main()": RIGHT + "import unittest\nif __name__ == '__main__':\n    unittest.main()\n",
    "guarded sys.exit(main())": RIGHT + "import sys\ndef main():\n    print(add(1, 2))\n"
    "if __name__ == '__main__':\n    sys.exit(main())\n",
    "prints while loading": "print('loading')\n" + RIGHT,
    "rebinds a builtin for itself": "import builtins\nbuiltins.abs = lambda x: 0\n" + RIGHT,
    "a helper class and a thread": "import threading\nclass Adder:\n    def run(self, a, b):\n        return a + b\n"
    "def add(a, b):\n    out = []\n    t = threading.Thread(target=lambda: out.append(Adder().run(a, b)))\n"
    "    t.start()\n    t.join()\n    return out[0]\n",
}


@pytest.mark.parametrize("name", sorted(RIGHT_WITH_HABITS))
def test_correct_solutions_still_pass(name):
    result = _score(RIGHT_WITH_HABITS[name])
    assert result.correct and (result.tests_passed, result.tests_total) == (4, 4), result


def test_per_test_pass_fraction():
    """A solution right on some inputs reports how many tests passed (per-test pass fraction)."""
    half = "def add(a, b):\n    return a + b if a > 0 else 99\n"  # right on (2,3), (0.5,.25), (10,0)
    result = _score(half)
    assert not result.correct and (result.tests_passed, result.tests_total) == (3, 4), result


def test_expected_exceptions_and_in_place_mutation():
    """Tests that expect a built-in exception, or check an in-place mutation, see what a local call would."""
    tests = textwrap.dedent(
        """
        try:
            f(-1)
            raise AssertionError("no error raised")
        except ValueError:
            pass
        xs = [3, 1, 2]
        f(xs)
        assert xs == [1, 2, 3]
        """
    )
    code = "def f(x):\n    if x == -1:\n        raise ValueError('neg')\n    x.sort()\n"
    v = judge_code(code, tests, "f")
    assert v.passed and v.tests_total == 3, v  # the try, the call statement, the assert
    assert not judge_code("def f(x):\n    return None\n", tests, "f").passed


def test_values_cross_exactly():
    """Big ints, floats, nested containers, sets, bytes, None and generators compare as a local call would."""
    tests = textwrap.dedent(
        """
        assert f(0) == 10 ** 5000
        assert f(1) == (1.5, [None, {"a": {1, 2}}], b"x")
        assert list(f(2)) == [0, 1, 2]
        assert f(3) is True
        assert type(f(4)) is tuple
        """
    )
    code = textwrap.dedent(
        """
        def f(k):
            return [10 ** 5000, (1.5, [None, {"a": {1, 2}}], b"x"), (i for i in range(3)), True, (1,)][k]
        """
    )
    v = judge_code(code, tests, "f")
    assert v.passed and v.tests_total == 5, v


def test_humaneval_items_right_and_wrong():
    """Real HumanEval items: canonical solutions pass, a constant body fails, helpers come from the prompt."""
    from eval.tasks import load_task

    items = {it.id: it for it in load_task("humaneval", limit=40).items}
    for key in ("HumanEval/0", "HumanEval/32", "HumanEval/38"):  # 32 and 38 use helpers from the prompt
        it = items[key]
        assert score(it, f"```python\n{it.meta['prompt']}{it.gold}```").correct, key
        assert not score(it, f"```python\n{it.meta['prompt']}    return None\n```").correct, key


def test_plus_style_test_loop_counts_each_input():
    """HumanEval+/MBPP+ style (numpy helper, a loop over inputs): each input is one test."""
    pytest.importorskip("numpy", reason="the Plus tests compare floats with numpy")
    tests = textwrap.dedent(
        """
        import numpy as np
        def assertion(out, exp, atol):
            if atol == 0 and isinstance(exp, float):
                atol = 1e-6
            if out != exp and atol != 0:
                assert np.allclose(out, exp, rtol=1e-07, atol=atol)
            else:
                assert out == exp
        inputs = [[1, 2], [2.5, 0.25], [10, -3]]
        results = [3, 2.75, 7]
        for inp, exp in zip(inputs, results):
            assertion(add(*inp), exp, 0)
        """
    )
    assert judge_code(RIGHT, tests, "add").tests_total == 3
    partial = judge_code("def add(a, b):\n    return a * b if a == 1 else a + b\n", tests, "add")
    assert not partial.passed and (partial.tests_passed, partial.tests_total) == (2, 3)
