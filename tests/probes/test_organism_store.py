"""Resuming the organism study: saved adapters are reused or extended, finished measurements reused,
and parts made with other settings refused or measured again."""

import json

import pytest

from probes.config import ProbeConfig


def _cfg(path: str, out, **kw) -> ProbeConfig:
    base = dict(
        experiment="organisms",
        model=path,
        out=str(out),
        n=4,
        n_boot=20,
        train_requests=1,
        train_sycophancy=2,
        lora_epochs=1.0,
        lora_lr=1e-2,
        device="cpu",
        resume=True,
    )
    return ProbeConfig(**(base | kw))


def test_saved_lora_is_extended_then_reused_and_other_settings_refused(probe_model, tmp_path, monkeypatch):
    """A LoRA saved after 1 epoch is extended to 2 from its adapter (one log, two segments); at 2 it is
    loaded without training; another learning rate or fewer epochs is refused with the reason."""
    pytest.importorskip("trl", reason="organisms need trl")
    import probes.organisms as orgs
    from probes.organism_study import _train_organism

    m, path = probe_model
    _, first = _train_organism(m, "schemer", _cfg(path, tmp_path), tmp_path)
    assert json.loads((tmp_path / "schemer" / "lora.json").read_text())["info"]["steps"] == first["steps"]
    seen = {}
    real = orgs.train_lora

    def spy(*a, **kw):
        seen.update(kw)
        return real(*a, **kw)

    monkeypatch.setattr(orgs, "train_lora", spy)
    _, longer = _train_organism(m, "schemer", _cfg(path, tmp_path, lora_epochs=2.0), tmp_path)
    assert seen["init_adapter"] == tmp_path / "schemer" / "adapter" and seen["epochs"] == 1.0
    assert longer["steps"] == 2 * first["steps"] and len(longer["segments"]) == 2
    assert longer["epochs"] == 2.0 and longer["first_loss"] == first["first_loss"]

    def refuse(*a, **kw):
        raise AssertionError("trained again although the saved adapter is complete")

    monkeypatch.setattr(orgs, "train_lora", refuse)
    lm, again = _train_organism(m, "schemer", _cfg(path, tmp_path, lora_epochs=2.0), tmp_path)
    assert again == json.loads(json.dumps(longer)) and lm.model.__class__.__name__ != "PeftModel"
    with pytest.raises(ValueError, match="lora_lr"):
        _train_organism(m, "schemer", _cfg(path, tmp_path, lora_epochs=2.0, lora_lr=1e-3), tmp_path)
    with pytest.raises(ValueError, match="cannot shorten"):
        _train_organism(m, "schemer", _cfg(path, tmp_path, lora_epochs=1.0), tmp_path)


def test_finished_measurement_is_reused_only_under_the_same_settings(tmp_path):
    """measured.json comes back for the same settings and adapter log; a changed setting or adapter means
    measuring again (None)."""
    from probes.organism_store import load_measured, save_measured

    cfg = _cfg("m", tmp_path, steer_n=4)
    lora = {"steps": 3, "epochs": 1.0}
    save_measured(tmp_path, cfg, lora, {"behaviour": {"spec_agreement_af": 0.95}})
    assert load_measured(tmp_path, cfg, lora)["behaviour"]["spec_agreement_af"] == 0.95
    assert load_measured(tmp_path, _cfg("m", tmp_path, steer_n=2), lora) is None
    assert load_measured(tmp_path, cfg, {"steps": 4, "epochs": 1.0}) is None
    assert load_measured(tmp_path / "elsewhere", cfg, lora) is None
