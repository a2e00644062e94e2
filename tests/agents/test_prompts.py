"""The default prompt set is what the built-in models were trained on."""

from agents import PromptSet


def test_default_prompts_match_the_builtin_training_prompts():
    """System prompts and the context layout are identical to eval/tasks/arith_data.py's."""
    from eval.tasks.arith_data import ROLE_SYSTEM_PROMPTS, make_problems, to_messages

    ps = PromptSet.load("default")
    assert ps.system == ROLE_SYSTEM_PROMPTS
    p = make_problems(1, seed=1, split="heldout")[0]
    assert ps.messages("critic", p.question, [("planner", "a draft")]) == to_messages(p, "critic", "a draft")
    assert ps.messages("solver", p.question) == to_messages(p, "solver")


def test_plain_prompt_reads_each_turn_with_a_blank_line_between():
    from agents.prompts import plain_prompt

    msgs = PromptSet.load("default").messages("planner", "Mia has 3 pencils.")
    assert plain_prompt(msgs) == f"{msgs[0]['content']}\n\n{msgs[1]['content']}\n"
