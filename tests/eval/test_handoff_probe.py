"""bench/studies/handoff_probe.py reads what the holders' thoughts spell and compares the answer with it."""

from agents.results import AgentStats, Result
from bench.studies.handoff_probe import answer_number, probe_item, spelled
from eval.tasks.handoff import HandoffItem


def _lens(*tops):
    return [[(t, 0.9), ("x", 0.05)] for t in tops]


def _result(text, *holders):
    ags = [AgentStats(f"holder_{i}", "holder", latent_tokens=_lens(*h)) for i, h in enumerate(holders)]
    return Result("q", text, "latent_mas", "g", ags + [AgentStats("answerer", "answerer")])


def test_spelled_reads_leading_digits_only():
    assert spelled(["5", "3", " Sara", "4"]) == "53"
    assert spelled(["in", "5"]) == ""


def test_answer_number_prefers_the_box():
    assert answer_number("7 then \\boxed{53} or 9") == "53"
    assert answer_number("no digits") is None


def test_probe_item_separates_writer_and_reader():
    item = HandoffItem("i", ["Ann's code is 47.", "Ben's code is 62."], "What is Ben's code?", "62")
    good = probe_item(item, _result("\\boxed{62}", ("4", "7"), ("6", "2")))
    assert good["writer_ok"] and good["correct"] and good["answer_is_spelled"]
    # the asked holder's second thought lost its digit; the answerer says the other holder's number
    bad = probe_item(item, _result("\\boxed{47}", ("4", "7"), ("6", "in")))
    assert not bad["writer_ok"] and not bad["correct"] and bad["answer_is_other_holder"]
    assert bad["holders"][1]["digit_ok"] == [True, False]
