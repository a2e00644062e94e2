"""What a candidate may do without changing its verdict: print freely, import the allowed packages
on every item alike; and what a hostile reply from its process may not cost."""

from __future__ import annotations

import time

import pytest

from eval.sandbox import code_codec
from eval.sandbox.code_verdict import judge_code

ADD_TESTS = "".join(f"assert add({i}, 1) == {i + 1}\n" for i in range(7))


def test_a_correct_solution_that_prints_21_mb_passes_every_test():
    """3 MB printed per call, 21 MB in all, past the 16 MiB file limit: stdout is discarded, all 7 pass."""
    candidate = "import sys\ndef add(a, b):\n    sys.stdout.write('x' * (3 << 20))\n    return a + b\n"
    v = judge_code(candidate, ADD_TESTS, "add", timeout=20)
    assert (v.passed, v.tests_passed, v.tests_total) == (True, 7, 7), v.detail


def test_stderr_of_the_candidate_is_discarded_too():
    """The same 21 MB written to stderr neither fails a test nor reaches the run's output."""
    candidate = "import sys\ndef add(a, b):\n    sys.stderr.write('x' * (3 << 20))\n    return a + b\n"
    v = judge_code(candidate, ADD_TESTS, "add", timeout=20)
    assert (v.passed, v.tests_passed) == (True, 7), v.detail


NUMPY_CANDIDATE = "import numpy as np\ndef add(a, b):\n    return int(np.add(a, b))\n"


@pytest.mark.parametrize("tests_import_numpy", [False, True])
def test_the_candidate_may_import_the_allowed_packages_on_every_item(tests_import_numpy):
    """One rule: a candidate importing numpy passes whether or not the item's own tests import numpy."""
    pytest.importorskip("numpy")
    tests = ("import numpy\n" if tests_import_numpy else "") + ADD_TESTS
    v = judge_code(NUMPY_CANDIDATE, tests, "add")
    assert v.passed, v.detail


@pytest.mark.parametrize("tests_import_numpy", [False, True])
def test_without_allowed_packages_no_item_lets_the_candidate_import_them(tests_import_numpy):
    """`packages=()`: the candidate gets the standard library only, on every item alike."""
    pytest.importorskip("numpy")
    tests = ("import math\n" if tests_import_numpy else "") + ADD_TESTS
    v = judge_code(NUMPY_CANDIDATE, tests, "add", packages=())
    assert not v.passed and "numpy" in v.detail


@pytest.mark.parametrize("literal", ["9" * 3_000_000, "1." + "5" * 3_000_000, "1e" + "9" * 3_000_000])
def test_a_huge_json_number_in_a_reply_is_refused_at_once(literal):
    """A bare JSON number of millions of digits (no "i" tag) fails the reply in milliseconds, with the
    int digit limit off as in the judge."""
    old = code_codec.sys.get_int_max_str_digits()
    code_codec.allow_big_ints()
    data = ('{"ok": true, "value": ["r", ' + literal + ', 1, 1], "args": []}').encode()
    start = time.perf_counter()
    try:
        with pytest.raises(ValueError, match="digits"):
            code_codec.loads(data)
    finally:
        code_codec.sys.set_int_max_str_digits(old)
    assert time.perf_counter() - start < 0.5


def test_a_worker_that_replies_with_a_huge_number_is_scored_wrong_quickly():
    """End to end: a candidate that writes a 3-million-digit JSON number as its reply fails in seconds."""
    forged = (
        "import os, struct, sys\n"
        "def add(a, b):\n"
        '    body = b\'{"ok": true, "value": ["r", \' + b\'9\' * 3_000_000 + b\', 1, 1], "args": []}\'\n'
        "    os.write(int(sys.argv[2]), struct.pack('>Q', len(body)) + body)\n"
        "    import time; time.sleep(60)\n"
    )
    start = time.perf_counter()
    v = judge_code(forged, "assert add(1, 2) == 3\n", "add", timeout=30)
    assert not v.passed
    assert time.perf_counter() - start < 10, v.detail


def test_a_numpy_scalar_returned_by_the_candidate_compares_as_its_value():
    """With numpy allowed, `np.int64(5)`, `np.bool_(True)` and `np.float32(0.5)` answers compare as the
    Python values they stand for, as `==` does in the official harnesses."""
    pytest.importorskip("numpy")
    candidate = (
        "import numpy as np\ndef f(k):\n    return [np.int64(5), np.bool_(True), np.float32(0.5)][k]\n"
    )
    v = judge_code(candidate, "assert f(0) == 5\nassert f(1) is True\nassert f(2) == 0.5\n", "f")
    assert (v.passed, v.tests_passed) == (True, 3), v.detail
