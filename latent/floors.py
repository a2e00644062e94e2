"""The project's top-level packages in floor order, lowest first: a package imports only packages on
floors below its own (never one above, never a sibling on its own floor), so nothing can import in a
circle and `latent/` stands on its own. `tests/test_structure.py` checks every import against it.

- `latent`: the hidden-state interface and what every package shares (the command builder, the entry
  point, device choice).
- `agents`: LatentMAS, on top of `latent`.
- `eval`: tasks (with their data generators), scoring and the harness that runs `agents`.
- `finetune`, `probes`, `families`, `serve`: independent users of the floors below; none imports another
  (`serve` puts agent graphs behind an OpenAI-compatible endpoint).
- `bench`: scripts that measure any of the above.
- `latentworks`: the command router; nothing imports it.
"""

from __future__ import annotations

__all__ = ["FLOORS", "PACKAGES", "floor_of"]

FLOORS: tuple[tuple[str, ...], ...] = (
    ("latent",),
    ("agents",),
    ("eval",),
    ("finetune", "probes", "families", "serve"),
    ("bench",),
    ("latentworks",),
)
PACKAGES: tuple[str, ...] = tuple(pkg for floor in FLOORS for pkg in floor)


def floor_of(package: str) -> int:
    """The floor number of a top-level package (0 is `latent`); a name outside the project is a KeyError."""
    for level, floor in enumerate(FLOORS):
        if package in floor:
            return level
    raise KeyError(f"{package!r} is not a package of the project; known: {', '.join(PACKAGES)}")
