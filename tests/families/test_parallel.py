"""The demos' shared job runner keeps job order in and out of worker processes."""

import math

import pytest

from families.parallel import run_jobs


def test_run_jobs_keeps_order_with_and_without_workers() -> None:
    jobs = [(pow, (2, k)) for k in range(6)] + [(math.sqrt, (81,))]
    expected = [1, 2, 4, 8, 16, 32, 9.0]
    assert run_jobs(jobs, 1) == expected
    assert run_jobs(jobs, 2) == expected
    with pytest.raises(ValueError, match="workers"):
        run_jobs(jobs, 0)
