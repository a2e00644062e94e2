"""The shipped SmolLM2 hand-off channels (`latent/builtin_models/smollm2-135m-instruct-handoff/` and its
`-wordings` sibling, trained on many wordings): each listed with its base, loaded by name on a fresh cache that holds only the pulled base, and its thoughts carry the
relay shares as its card says (the card's held-out relay rows, re-run here, within their intervals)."""

from __future__ import annotations

import json

import pytest

from tests.real.conftest import fresh_cache as fresh_cache_of
from tests.real.conftest import pulled_model

NAMES = ["smollm2-135m-instruct-handoff", "smollm2-135m-instruct-handoff-wordings"]


@pytest.fixture(scope="module", params=NAMES)
def shipped(request):
    """The shipped adapter's catalogue entry, or a skip saying it is not in this checkout."""
    from latent.catalogue import list_adapters

    name = request.param

    found = [a for a in list_adapters() if a.name == name and a.where == "shipped"]
    if not found:
        pytest.skip(
            f"{name} is not shipped in this checkout (no latent/builtin_models/{name}/adapter_config.json); "
            f"its recipe retrains it: latentworks finetune mas --config finetune/recipes/{name}.yaml"
        )
    if not found[0].card.get("eval_after", {}).get("relay"):
        pytest.fail(f"the shipped {name} has no card with held-out relay rows (card.json, eval_after.relay)")
    return found[0]


@pytest.fixture(scope="module")
def fresh_cache(shipped, tmp_path_factory):
    """A cache holding only the pulled base (linked), so `load_model(NAME)` can find nothing but the
    shipped adapter and its base."""
    pulled_model(shipped.base)  # pulls once per machine, or skips naming why it cannot
    with fresh_cache_of(tmp_path_factory.mktemp("fresh-cache"), [shipped.base]) as cache:
        yield cache


def test_the_shipped_channel_lists_with_its_base_and_loads_by_name(shipped, fresh_cache, capsys):
    """`latentworks models list` shows it as shipped on the base its card names; `load_model(NAME)` on
    the fresh cache loads the shipped copy, and its thoughts differ from the base's (the channel acts)."""
    import torch

    from latent import load_model, resolve_model_path
    from latentworks.cli import main

    assert main(["models", "list", "--json"]) == 0
    name = shipped.name
    row = next(r for r in json.loads(capsys.readouterr().out) if r["name"] == name)
    assert row["kind"] == "adapter" and row["status"] == "shipped" and row["base"] == shipped.card["base"]
    assert resolve_model_path(name) == str(shipped.path)
    trained, base = load_model(name, device="cpu"), load_model(shipped.base, device="cpu")
    k = shipped.card["latent_steps"]

    def thoughts(lm):
        enc = lm.encode([[{"role": "user", "content": "Priya's room is 48. Which room is Priya in?"}]])
        with torch.no_grad():
            return lm.think(lm.prefill(**enc), k)[0]

    t = thoughts(trained)
    assert t.shape[:2] == (1, k) and torch.isfinite(t).all()
    assert not torch.allclose(t, thoughts(base), atol=1e-3)


@pytest.mark.parametrize("row", ["latent_only", "latent_only_other"])
def test_the_shipped_channel_reproduces_its_cards_relay_rows(shipped, fresh_cache, row):
    """The card's held-out relay row (its test items, k thoughts) re-run here lands in the card's Wilson
    95% interval: the thoughts carry the share (latent_only) and another item's thoughts do not (other)."""
    from eval.report import wilson
    from eval.tasks import handoff as th
    from eval.tasks.handoff_rows import MAX_NEW_TOKENS, run_row
    from latent import load_model

    cell = shipped.card["eval_after"]["relay"][row]
    items = th.make_items("relay", cell["n"], "test", 0)
    got = run_row(
        load_model(shipped.name, device="cpu"), items, row, shipped.card["latent_steps"], MAX_NEW_TOKENS, 16
    )
    lo, hi = wilson(cell["correct"], cell["n"])
    assert lo <= got.correct / got.n <= hi, (row, got.correct, cell)
