"""Train a small byte-level BPE chat tokenizer locally (no hub).

Used by the tiny test models and by the built-in model recipe, so both share one chat template.
Digits are split one per token: arithmetic models learn carries far faster that way.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import PreTrainedTokenizerFast

PAD_TOKEN = "<|pad|>"
IM_START = "<|im_start|>"
IM_END = "<|im_end|>"
SPECIAL_TOKENS = [PAD_TOKEN, IM_START, IM_END]

# ChatML with `{% generation %}` markers so TRL's `assistant_only_loss=True` can mask the prompt.
CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{% if message['role'] == 'assistant' %}"
    "{{ '<|im_start|>assistant\n' }}{% generation %}{{ message['content'] + '<|im_end|>' }}{% endgeneration %}"
    "{{ '\n' }}"
    "{% else %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>\n' }}"
    "{% endif %}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)

# Gemma's turn format for a base checkpoint that ships no template (gemma-3-270m): a system message is
# folded into the first user turn, as Gemma has no system role; the sequence opens with <bos>.
GEMMA_TURN_TEMPLATE = (
    "{{ bos_token }}{% set sys = namespace(text='') %}"
    "{% for message in messages %}"
    "{% if message['role'] == 'system' %}{% set sys.text = message['content'] + '\n\n' %}"
    "{% else %}"
    "{{ '<start_of_turn>' + ('model' if message['role'] == 'assistant' else 'user') + '\n' }}"
    "{% if message['role'] == 'user' %}{{ sys.text }}{% set sys.text = '' %}{% endif %}"
    "{{ message['content'] + '<end_of_turn>\n' }}"
    "{% endif %}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<start_of_turn>model\n' }}{% endif %}"
)
CHAT_TEMPLATES = {"gemma": GEMMA_TURN_TEMPLATE, "chatml": CHAT_TEMPLATE}


def chat_template(spec: str) -> str:
    """A chat template by name (`gemma`, `chatml`) or read from a Jinja file at `spec`."""
    if spec in CHAT_TEMPLATES:
        return CHAT_TEMPLATES[spec]
    path = Path(spec)
    if not path.is_file():
        raise ValueError(
            f"unknown chat template {spec!r}: use one of {sorted(CHAT_TEMPLATES)} or the path of a Jinja file."
        )
    return path.read_text()


def train_chat_tokenizer(texts: Iterable[str], vocab_size: int = 512) -> PreTrainedTokenizerFast:
    """Train a byte-level BPE tokenizer with single-digit tokens and a ChatML chat template.

    Args:
        texts: training corpus (any iterable of strings; consumed once).
        vocab_size: target vocabulary size including the 256 byte symbols and special tokens.
    """
    if vocab_size < 256 + len(SPECIAL_TOKENS):
        raise ValueError(
            f"`vocab_size`={vocab_size} is too small: a byte-level BPE needs at least "
            f"{256 + len(SPECIAL_TOKENS)} entries (256 bytes + special tokens)."
        )
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.Digits(individual_digits=True), pre_tokenizers.ByteLevel(add_prefix_space=False)]
    )
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(texts, trainer=trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        pad_token=PAD_TOKEN,
        eos_token=IM_END,
        bos_token=None,
        unk_token=None,
        additional_special_tokens=[IM_START],
        padding_side="left",
    )
    fast.chat_template = CHAT_TEMPLATE
    return fast
