"""The token prefix every row of a batch shares (an agent's system prompt), so it is read once.

Every agent's prompt starts with the same system text for every question of a batch; a prefill that
reads it once and copies its keys and values into every row skips about a third of a short prompt's
compute (`bench/speed/prefix_share.py`). The batch is laid out as [shared prefix][pads][rest of the row]:
pads are masked and position ids count only real tokens, so each row's computation is the one its
left-padded layout gives (equal up to float rounding of the batch-1 prefix).

Shapes: B = batch, L = padded length, P = shared prefix length.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

MIN_SHARED = 8  # shorter prefixes are not worth a second forward call


@dataclass
class PrefixSplit:
    """A batch re-laid out as [prefix][pads][rest]: `input_ids`/`attention_mask` (B, L') in that layout,
    the first `length` columns being the prefix (real in every row)."""

    input_ids: torch.Tensor
    attention_mask: torch.Tensor
    length: int


def split_shared_prefix(
    input_ids: torch.Tensor, attention_mask: torch.Tensor, pad_id: int, min_shared: int = MIN_SHARED
) -> PrefixSplit | None:
    """The batch with its common prefix moved to the front, or None when fewer than `min_shared` tokens
    are shared or the batch has one row. At least one token of every row stays after the prefix, so each
    row's last column is real (the state's last hidden state is the row's own)."""
    b = int(input_ids.shape[0])
    if b < 2:
        return None
    rows = [ids[m.bool()].tolist() for ids, m in zip(input_ids.cpu(), attention_mask.cpu())]
    shortest = min(len(r) for r in rows)
    first = rows[0]
    n = 0
    while n < shortest - 1 and all(r[n] == first[n] for r in rows):
        n += 1
    if n < min_shared:
        return None
    width = max(len(r) for r in rows)
    ids = torch.full((b, width), pad_id, dtype=input_ids.dtype)
    mask = torch.zeros((b, width), dtype=attention_mask.dtype)
    ids[:, :n] = torch.tensor(first[:n], dtype=input_ids.dtype)
    mask[:, :n] = 1
    for r, row in enumerate(rows):
        rest = row[n:]
        ids[r, width - len(rest) :] = torch.tensor(rest, dtype=input_ids.dtype)
        mask[r, width - len(rest) :] = 1
    return PrefixSplit(ids.to(input_ids.device), mask.to(attention_mask.device), n)
