"""bench/studies/handoff_compare.py: a row counts as reproduced by the published interval, never by the new one."""

import pytest

from bench.studies.handoff_compare import compare, markdown
from latent.args import UsageError


def test_inside_and_overlap_are_read_against_the_published_interval():
    published = {"latent_only": {"correct": 95, "n": 100}, "text_mas": {"correct": 82, "n": 100}}
    new = {
        "latent_only": {"correct": 94, "n": 100},
        "text_mas": {"correct": 100, "n": 100},
        "extra": {"correct": 1, "n": 100},
    }
    recs = {r["row"]: r for r in compare(published, new)}
    assert set(recs) == {"latent_only", "text_mas"}  # rows of one table only are left out
    assert recs["latent_only"]["inside"] and recs["latent_only"]["overlap"]
    assert (
        not recs["text_mas"]["inside"] and not recs["text_mas"]["overlap"]
    )  # 82 [73.3, 88.3] vs 100 [96.3, 100]
    assert markdown(list(recs.values()), "t").endswith(
        "1 of 2 rows inside the published interval; 1 with overlapping intervals."
    )


def test_tables_on_different_items_are_refused():
    with pytest.raises(UsageError, match="same items"):
        compare({"oracle": {"correct": 5, "n": 64}}, {"oracle": {"correct": 5, "n": 100}})
