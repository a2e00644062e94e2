"""Character-level text from the Python standard library's own sources (ships with Python: no download)."""

from __future__ import annotations

import string
import sysconfig
from pathlib import Path

import torch

CHARS = string.printable[:95] + "\n"  # digits, letters, punctuation, space, newline; others map to "?"
STOI = {c: i for i, c in enumerate(CHARS)}

_FILES = ("json/encoder.py", "json/decoder.py", "textwrap.py", "string.py", "heapq.py", "bisect.py",
          "fnmatch.py", "shlex.py", "colorsys.py", "queue.py", "statistics.py", "argparse.py")  # fmt: skip


def load_corpus(max_chars: int = 400_000) -> str:
    """Concatenated stdlib sources (a fixed file list, so every machine with Python 3.11+ sees the same text)."""
    root = Path(sysconfig.get_paths()["stdlib"])
    text = "".join((root / f).read_text(encoding="utf-8") for f in _FILES if (root / f).exists())
    if not text:
        raise ValueError(f"no stdlib sources found under {root}; cannot build the corpus.")
    return text[:max_chars]


def encode(text: str) -> torch.Tensor:
    """Char ids (N,), unknown characters mapped to '?'."""
    q = STOI["?"]
    return torch.tensor([STOI.get(c, q) for c in text], dtype=torch.long)


def decode(ids: torch.Tensor) -> str:
    """Inverse of `encode`."""
    return "".join(CHARS[i] for i in ids.tolist())


def split(ids: torch.Tensor, test_frac: float = 0.1) -> tuple[torch.Tensor, torch.Tensor]:
    """Contiguous train/test split (the tail is the test set)."""
    if not 0 < test_frac < 1:
        raise ValueError(f"`test_frac` must be in (0, 1), got {test_frac}.")
    cut = int(len(ids) * (1 - test_frac))
    return ids[:cut], ids[cut:]


def batches(ids: torch.Tensor, block: int, b: int, generator: torch.Generator | None = None) -> torch.Tensor:
    """b random windows of length `block`, (b, block)."""
    if len(ids) <= block:
        raise ValueError(f"corpus of {len(ids)} tokens is shorter than the block size {block}.")
    start = torch.randint(0, len(ids) - block, (b,), generator=generator)
    return torch.stack([ids[s : s + block] for s in start.tolist()])
