"""Shipped bridges (`latent/builtin_models/<sender>-to-<receiver>-bridge/`): each loads by name on a fresh cache that
holds only its two pulled bases, names the models it joins, and carries the relay shares across them as its card
says (the card's held-out relay rows, re-run here, within their Wilson intervals)."""

from __future__ import annotations

import json

import pytest

from tests.real.conftest import fresh_cache, pulled_model


def _shipped() -> list[str]:
    from latent.catalogue import BUILTIN_DIR

    return sorted(p.parent.name for p in BUILTIN_DIR.glob("*/bridge_config.json"))


@pytest.fixture(scope="module", params=_shipped() or ["none"])
def shipped(request, tmp_path_factory):
    """(name, card) of a shipped bridge, a fresh cache of its two bases set while in use; or a skip saying why."""
    from latent import is_pulled
    from latent.catalogue import BUILTIN_DIR

    if request.param == "none":
        pytest.skip("no bridge is shipped in this checkout (latent/builtin_models/*/bridge_config.json)")
    path = BUILTIN_DIR / request.param
    card = json.loads((path / "card.json").read_text())
    if not card.get("eval_after", {}).get("relay"):
        pytest.fail(f"the shipped bridge {request.param} has no card with held-out relay rows")
    bases = (card["sender"], card["base"])
    for base in bases:
        if base.startswith("qwen") and not is_pulled(base):
            pytest.skip(
                f"{base} is not pulled here (too large for every test run): `latentworks models pull {base}`"
            )
    for base in bases:
        pulled_model(base)  # the small ones pull here once per machine
    with fresh_cache(tmp_path_factory.mktemp("fresh-cache"), list(bases)):
        yield request.param, card


def test_the_shipped_bridge_loads_by_name_and_names_its_models(shipped):
    from latent.bridge import Bridge, resolve_bridge_path
    from latent.catalogue import BUILTIN_DIR

    name, card = shipped
    assert resolve_bridge_path(name) == BUILTIN_DIR / name
    bridge = Bridge.from_pretrained(name)
    assert (bridge.sender, bridge.receiver) == (card["sender"], card["base"])


@pytest.mark.parametrize("row", ["latent_only", "latent_only_other"])
def test_the_shipped_bridge_reproduces_its_cards_relay_rows(shipped, row):
    """Thoughts handed across the two models carry the relay share (latent_only) and another item's
    thoughts do not (other), as the card's held-out rows say."""
    from eval.report import wilson
    from eval.tasks import handoff as th
    from eval.tasks.handoff_rows import MAX_NEW_TOKENS, Pair, run_row
    from latent import load_model
    from latent.bridge import Bridge

    name, card = shipped
    cell = card["eval_after"]["relay"][row]
    items = th.make_items("relay", cell["n"], "test", 0)
    pair = Pair(load_model(card["sender"], device="cpu"), Bridge.from_pretrained(name))
    got = run_row(
        load_model(card["base"], device="cpu"), items, row, card["latent_steps"], MAX_NEW_TOKENS, 16, pair
    )
    lo, hi = wilson(cell["correct"], cell["n"])
    assert lo <= got.correct / got.n <= hi, (row, got.correct, cell)
