"""A registry or config file with a typo, an unknown key or a duplicated key: the asset that reads it fails
with an error naming the file and the key (and the line, for the schema-validated configs), before it writes
anything; the tables, snapshots and publication stay as they were; the corrected file runs.

Through real assets where one reads the file (the epoch_hub source asset reads benchmarks.yaml, the
`oriented_scores` stage cleaning.yaml, `stan_data` model.yaml); the other files through their loaders.
"""

from __future__ import annotations

import re
from pathlib import Path

import dagster as dg
import duckdb
import pytest
import yaml
from dagster_duckdb import DuckDBResource

from atlas_assets.clean import config as cleaning_config
from atlas_assets.config_schema import ConfigError
from atlas_assets.defs.clean.assets import stage_assets
from atlas_assets.defs.ingest import assets as ingest_assets
from atlas_assets.defs.model.assets import stan_data
from atlas_assets.model.simulate import simulate_panel, simulated_references
from atlas_assets.model.stan_data import load_model_config
from atlas_assets.outputs.config import load_outputs_config
from atlas_assets.publish.config import load_publish_config
from atlas_assets.registry.benchmarks import RegistryError, load_benchmark_registry
from atlas_assets.registry.model_ids import RegistryConfigError, load_model_overrides, load_reasoning_rules
from atlas_assets.settings import CONFIG_DIR
from tests.clean.fixtures import Panel
from tests.faults.harness import REGISTRY, Ledger, files_with_bytes


def edited(source: Path, folder: Path, old: str, new: str, *, nth: int = 0) -> tuple[Path, int]:
    """A copy of `source` with the `nth` line holding `old` edited; returns the copy and that line (1-based)."""
    lines = source.read_text().splitlines(keepends=True)
    hits = [i for i, line in enumerate(lines) if old in line]
    lines[hits[nth]] = lines[hits[nth]].replace(old, new, 1)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / source.name
    path.write_text("".join(lines))
    return path, hits[nth] + 1


def failure_text(result: dg.ExecuteInProcessResult) -> str:
    return " ".join(str(event.event_specific_data.error) for event in result.get_step_failure_events())


@pytest.mark.parametrize("old,new,named", [
    ("    direction: higher", "    directon: higher", r"toy_mc.*directon"),
    ("  toy_agent:\n", "  toy_mc:\n", r"duplicate key 'toy_mc'"),
], ids=["benchmarks_yaml_unknown_key", "benchmarks_yaml_duplicate_key"])
def test_a_broken_registry_stops_the_source_before_it_writes(old, new, named, home, epoch, monkeypatch, tmp_path):
    broken, line = edited(REGISTRY, tmp_path / "broken", old, new)
    with pytest.raises(RegistryError) as raised:
        load_benchmark_registry(broken)
    assert str(broken) in str(raised.value) and re.search(named, str(raised.value)), raised.value
    before = Ledger.take(home)
    good = ingest_assets.load_benchmark_registry
    monkeypatch.setattr(ingest_assets, "load_benchmark_registry", lambda: load_benchmark_registry(broken))
    outcome = home.run(epoch, checks=())
    assert not outcome.success
    text = failure_text(outcome.result)
    assert "RegistryError" in text and str(broken) in text and re.search(named, text), text
    before.assert_kept(home)
    assert Ledger.take(home).attempts == before.attempts  # it stopped before even fetching
    monkeypatch.setattr(ingest_assets, "load_benchmark_registry", good)
    assert home.rerun_good(epoch).staged() == before.staged["epoch_hub"]


def clean_home(path: Path) -> None:
    p = Panel().benchmark("gpqa")
    for i in range(4):
        p.model(f"m{i}")
        p.score(f"m{i}", "gpqa", 0.3 + 0.1 * i)
    p.connect(duckdb.connect(str(path))).close()


def tables(path: Path) -> dict[str, list]:
    with duckdb.connect(str(path), read_only=True) as conn:
        names = [r[0] for r in conn.execute("SELECT table_name FROM information_schema.tables ORDER BY 1").fetchall()]
        return {n: sorted(map(repr, conn.execute(f'SELECT * FROM "{n}"').fetchall())) for n in names}


def test_a_typo_in_cleaning_yaml_fails_the_stage_and_changes_no_table(tmp_path, monkeypatch):
    database = tmp_path / "atlas.duckdb"
    clean_home(database)
    broken, line = edited(cleaning_config.DEFAULT_PATH, tmp_path / "broken", "floor_guard_fraction:", "floor_guard_fracton:")
    monkeypatch.setattr(cleaning_config, "DEFAULT_PATH", broken)
    before = tables(database)
    oriented = next(a for a in stage_assets if "oriented_scores" in {k.to_user_string() for k in a.keys})
    resources = {"duckdb": DuckDBResource(database=str(database))}
    result = dg.materialize([oriented], resources=resources, raise_on_error=False)
    assert not result.success
    text = failure_text(result)
    assert f"{broken.name}, line {line}: protocol_screen.floor_guard_fracton: unknown key" in text, text
    assert tables(database) == before
    monkeypatch.setattr(cleaning_config, "DEFAULT_PATH", CONFIG_DIR / "cleaning.yaml")
    again = dg.materialize([oriented], resources=resources, raise_on_error=False)
    assert again.success
    with duckdb.connect(str(database), read_only=True) as conn:
        assert conn.execute("SELECT count(*) FROM oriented_scores").fetchone()[0] == 4


def test_an_unknown_key_in_model_yaml_fails_stan_data_before_it_writes(tmp_path, monkeypatch):
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("ATLAS_HOME", str(home))
    monkeypatch.delenv("ATLAS_DUCKDB", raising=False)
    config = load_model_config()
    observations, truth = simulate_panel(seed=3, config=config, n_models=12, n_families=4, target_obs=60)
    config["display"]["reference"] = simulated_references(observations, truth)
    good = tmp_path / "good" / "model.yaml"
    good.parent.mkdir()
    good.write_text(yaml.safe_dump(config, sort_keys=False))
    broken, line = edited(good, tmp_path / "broken", "chains:", "chians:")
    with duckdb.connect(str(home / "atlas.duckdb")) as conn:
        conn.register("panel", observations)
        conn.execute("CREATE TABLE modeled_observations AS SELECT * FROM panel")
    before = tables(home / "atlas.duckdb")
    resources = {"duckdb": DuckDBResource(database=str(home / "atlas.duckdb"))}

    monkeypatch.setenv("ATLAS_MODEL_CONFIG", str(broken))
    result = dg.materialize([stan_data], resources=resources, raise_on_error=False)
    assert not result.success
    text = failure_text(result)
    assert "ConfigError" in text and re.search(rf"model\.yaml, line {line}: sampler\.chians: unknown key", text), text
    assert tables(home / "atlas.duckdb") == before and files_with_bytes(home / "model") == {}

    monkeypatch.setenv("ATLAS_MODEL_CONFIG", str(good))
    again = dg.materialize([stan_data], resources=resources, raise_on_error=False)
    assert again.success
    assert len(list((home / "model" / "inputs").iterdir())) == 1


@pytest.mark.parametrize("name,loader,old,new,named", [
    ("outputs.yaml", load_outputs_config, "replicates:", "replicate:", r"line {line}: .*replicate: unknown key"),
    ("publish.yaml", load_publish_config, "required_validation:", "required_validaton:",
     r"line {line}: required_validaton: unknown key"),
    ("model.yaml", load_model_config, "adapt_delta: 0.75", 'adapt_delta: "0.75"', r"line {line}: sampler\.adapt_delta"),
], ids=["outputs_yaml_typo", "publish_yaml_typo", "model_yaml_quoted_number"])
def test_a_schema_validated_config_names_file_key_and_line(name, loader, old, new, named, tmp_path):
    broken, line = edited(CONFIG_DIR / name, tmp_path, old, new)
    with pytest.raises(ConfigError) as raised:
        loader(broken)
    assert name in str(raised.value) and re.search(named.format(line=line), str(raised.value)), raised.value
    assert (CONFIG_DIR / name).read_text() != broken.read_text()  # the shipped file untouched, and valid:
    loader(CONFIG_DIR / name)


@pytest.mark.parametrize("name,loader,key", [("reasoning_rules.yaml", load_reasoning_rules, "not_settings"),
                                             ("models.yaml", load_model_overrides, "aliases")],
                         ids=["reasoning_rules_yaml_misspelt_optional_section", "models_yaml_misspelt_section"])
def test_a_registry_rules_file_with_a_misspelt_section_is_refused(name, loader, key, tmp_path):
    """Both sections are optional, so before the fix a misspelt key read as an absent section: every alias (or
    every not-a-setting rule) silently gone."""
    lines = (CONFIG_DIR / name).read_text().splitlines(keepends=True)
    (at,) = [i for i, text in enumerate(lines) if text.startswith(f"{key}:")]
    lines[at] = lines[at].replace(f"{key}:", f"{key}s:", 1)
    broken, line = tmp_path / name, at + 1
    broken.write_text("".join(lines))
    with pytest.raises(RegistryConfigError) as raised:
        loader(broken)
    message = str(raised.value)
    assert f"{broken}, line {line}: unknown top-level key '{key}s'" in message, message
    loader(CONFIG_DIR / name)
