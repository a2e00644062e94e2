"""Chat templates by name: Gemma's turn format for base checkpoints without one, and clear errors."""

import pytest

from latent.testing import tiny_model
from latent.tokenizer import CHAT_TEMPLATE, GEMMA_TURN_TEMPLATE, chat_template


def test_named_templates_and_files(tmp_path):
    """Names map to the shipped templates; any other spec is read as a Jinja file."""
    assert chat_template("gemma") == GEMMA_TURN_TEMPLATE and chat_template("chatml") == CHAT_TEMPLATE
    f = tmp_path / "t.jinja"
    f.write_text("{{ messages[0]['content'] }}")
    assert chat_template(str(f)) == "{{ messages[0]['content'] }}"
    with pytest.raises(ValueError, match="unknown chat template 'nope'"):
        chat_template("nope")


def test_gemma_turns_fold_the_system_prompt_into_the_first_user_turn(tmp_path):
    """Gemma has no system role: the system text opens the first user turn; the prompt starts with bos."""
    tok = tiny_model("llama", tmp_path).tokenizer  # any tokenizer renders the template
    tok.chat_template = chat_template("gemma")
    msgs = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Q?"}]
    text = tok.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True)
    bos = tok.bos_token or ""
    assert text == f"{bos}<start_of_turn>user\nBe brief.\n\nQ?<end_of_turn>\n<start_of_turn>model\n"
