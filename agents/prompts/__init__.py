"""Prompt sets (YAML): system prompt per role and the user-turn layout."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import yaml

from latent.args import load_yaml

PROMPT_DIR = Path(__file__).parent


def plain_prompt(messages: list[dict]) -> str:
    """Chat messages as plain text, for a base checkpoint without a chat template (Gemma-3-270m): each
    turn's content, a blank line between turns, a newline after the last."""
    return "\n\n".join(m["content"] for m in messages) + "\n"


@dataclass
class PromptSet:
    """System prompts by role plus the user-turn templates. Load with `PromptSet.load("default")`."""

    system: dict[str, str]
    user: str
    user_with_context: str
    context_item: str
    context_separator: str
    # latent_mas: the user turn of an agent whose prompt follows upstream prompts in the shared memory
    # (an incoming `kv` edge), where the question has already been read. None: re-read the question, as
    # the LatentMAS paper's prompts do.
    user_in_memory: str | None = None
    # an upstream agent given a share of the information (`agents.run(..., shares=)`) reads it before the
    # question; the final agent never gets one
    user_with_share: str = "{share}\n\n{question}"

    @classmethod
    def load(cls, name_or_path: str = "default") -> PromptSet:
        path = Path(name_or_path)
        if not path.is_file():
            path = PROMPT_DIR / f"{name_or_path}.yaml"
        if not path.is_file():
            known = sorted(p.stem for p in PROMPT_DIR.glob("*.yaml"))
            raise ValueError(
                f"unknown prompt set {name_or_path!r}; shipped sets: {known}, or pass a YAML path."
            )
        try:
            spec = load_yaml(path.read_text(), f"prompt set {path}")  # size and alias limits
        except (
            yaml.YAMLError,
            RecursionError,
            ValueError,
        ) as err:  # RecursionError: nesting past the parser's depth
            first = str(err).splitlines()[0] if str(err) else type(err).__name__
            raise ValueError(f"prompt set {path} is not valid YAML ({first}). Fix the file.") from None
        if not isinstance(spec, dict):
            raise ValueError(f"prompt set {path} must be a YAML mapping of the prompt keys. Fix the file.")
        if "extends" in spec:  # a variant: the named set with some keys replaced
            base = cls.load(spec.pop("extends"))
            spec = {**{k: getattr(base, k) for k in cls.__dataclass_fields__}, **spec}
        missing = {"system", "user", "user_with_context", "context_item", "context_separator"} - set(spec)
        if missing:
            raise ValueError(f"prompt set {path} lacks keys {sorted(missing)}.")
        unknown = set(spec) - set(cls.__dataclass_fields__)
        if unknown:
            raise ValueError(f"prompt set {path} has unknown keys {sorted(unknown)}. Remove them.")
        return cls(**{k: spec[k] for k in cls.__dataclass_fields__ if k in spec})

    def messages(
        self,
        role: str,
        question: str,
        context: list[tuple[str, str]] | None = None,
        question_in_memory: bool = False,
        share: str | None = None,
    ) -> list[dict]:
        """Chat messages for `role`; `context` = [(agent, text), ...] from text hand-offs.
        `question_in_memory`: the agent reads upstream prompts from the latent memory, so a set with
        `user_in_memory` does not repeat the question. `share`: information only this agent holds, read
        before the question (`user_with_share`)."""
        if role not in self.system:
            raise ValueError(f"no system prompt for role {role!r}; roles in this set: {sorted(self.system)}.")
        if share:
            question = self.user_with_share.format(share=share, question=question)
        if question_in_memory and self.user_in_memory is not None and not context:
            user = self.user_in_memory.format(question=question)
        elif context:
            joined = self.context_separator.join(
                self.context_item.format(agent=a, text=t) for a, t in context
            )
            user = self.user_with_context.format(question=question, context=joined)
        else:
            user = self.user.format(question=question)
        return [{"role": "system", "content": self.system[role]}, {"role": "user", "content": user}]
