"""`latentworks models list` lists trained adapters, from the cache and shipped beside the built-in models,
each with the base it loads on (`latent.catalogue.list_adapters`)."""

import json
import shutil

import latent.catalogue
from finetune.thought_channel import ThoughtChannelConfig, prepare, save_model
from latent import load_model
from latentworks.cli import main


def test_models_list_shows_cache_and_shipped_adapters_with_their_base(llama, tmp_path, monkeypatch, capsys):
    """A LoRA channel saved into the cache lists as `trained`, a copy in the shipped folder as `shipped`,
    both naming their base; directories without an adapter, or with an unreadable one, are not listed."""
    cache, shipped = tmp_path / "cache", tmp_path / "shipped"
    monkeypatch.setenv("LATENTWORKS_CACHE", str(cache))
    monkeypatch.setattr(latent.catalogue, "BUILTIN_DIR", shipped)
    cfg = ThoughtChannelConfig(base=llama.model.name_or_path, out_dir="unused", lora_r=2)
    lm, _ = prepare(cfg, load_model(llama.model.name_or_path))
    save_model(lm, cache / "models" / "tiny-handoff", base="tiny-base")
    (cache / "models" / "tiny-handoff" / "card.json").write_text(json.dumps({"licence": "Apache-2.0"}))
    shutil.copytree(cache / "models" / "tiny-handoff", shipped / "tiny-shipped-handoff")
    shutil.copytree(llama.model.name_or_path, cache / "models" / "plain-model")  # a model, not an adapter
    (cache / "models" / "broken").mkdir()
    (cache / "models" / "broken" / "adapter_config.json").write_text("{not json")

    assert main(["models", "list", "--json"]) == 0
    rows = {r["name"]: r for r in json.loads(capsys.readouterr().out) if r["kind"] == "adapter"}
    assert set(rows) == {"tiny-handoff", "tiny-shipped-handoff"}
    assert rows["tiny-handoff"]["status"] == "trained" and rows["tiny-shipped-handoff"]["status"] == "shipped"
    assert {r["base"] for r in rows.values()} == {"tiny-base"}
    assert rows["tiny-handoff"]["licence"] == "Apache-2.0" and rows["tiny-handoff"]["size_bytes"] > 0
    assert main(["models"]) == 0
    table = capsys.readouterr().out
    line = next(x for x in table.splitlines() if x.startswith("tiny-shipped-handoff"))
    assert "shipped" in line and line.endswith(f"{shipped / 'tiny-shipped-handoff'}  (on tiny-base)")


def test_models_list_shows_bridges_with_the_models_they_join(tmp_path, monkeypatch, capsys):
    """A bridge in the cache lists as a `trained` bridge, one in the shipped folder as `shipped`, each
    naming its sender and receiver; a directory with an unreadable bridge config is left out."""
    from latent.bridge import Bridge

    cache, shipped = tmp_path / "cache", tmp_path / "shipped"
    monkeypatch.setenv("LATENTWORKS_CACHE", str(cache))
    monkeypatch.setattr(latent.catalogue, "BUILTIN_DIR", shipped)
    Bridge(8, 6, "tiny-sender", "tiny-receiver").save_pretrained(cache / "models" / "s-to-r-bridge")
    shutil.copytree(cache / "models" / "s-to-r-bridge", shipped / "shipped-bridge")
    (shipped / "shipped-bridge" / "card.json").write_text(json.dumps({"licence": "Apache-2.0"}))
    (cache / "models" / "broken-bridge").mkdir()
    (cache / "models" / "broken-bridge" / "bridge_config.json").write_text("{not json")

    assert main(["models", "list", "--json"]) == 0
    rows = {r["name"]: r for r in json.loads(capsys.readouterr().out) if r["kind"] == "bridge"}
    assert set(rows) == {"s-to-r-bridge", "shipped-bridge"}
    assert rows["s-to-r-bridge"]["status"] == "trained" and rows["shipped-bridge"]["status"] == "shipped"
    assert {(r["sender"], r["base"]) for r in rows.values()} == {("tiny-sender", "tiny-receiver")}
    assert rows["shipped-bridge"]["licence"] == "Apache-2.0" and rows["s-to-r-bridge"]["size_bytes"] > 0
    assert main(["models"]) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("shipped-bridge"))
    assert "bridge" in line and line.endswith("(tiny-sender -> tiny-receiver)")
