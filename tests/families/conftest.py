"""One set-up for every family test: a fixed seed and one intra-op thread (the tensors are tiny; on a
shared CPU spinning OpenMP threads make these tests 10-100x slower), restored afterwards."""

import pytest
import torch


@pytest.fixture(autouse=True)
def _seed_and_one_thread():
    torch.manual_seed(16)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
