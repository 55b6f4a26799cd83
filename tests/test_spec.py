"""The specification fingerprint covers everything that shapes a published number, and says what moved."""

import shutil
from pathlib import Path

from atlas_assets import settings
from atlas_assets.spec import changed_files, manifest_fingerprint, specification_manifest


def copy_project(tmp_path: Path) -> tuple[Path, Path]:
    root = tmp_path / "project"
    for folder in ("sql", "stan"):
        shutil.copytree(settings.PROJECT_ROOT / folder, root / folder)
    shutil.copytree(settings.PACKAGE_ROOT, root / "atlas_assets", ignore=shutil.ignore_patterns("__pycache__"))
    return root, root / "atlas_assets"


def manifest_of(root: Path, package: Path) -> dict:
    return specification_manifest(root, package, package / "config" / "model.yaml")


def test_the_modelling_and_cleaning_code_is_part_of_the_specification():
    manifest = specification_manifest()
    model_code = manifest["model_code"]
    for module in ("stan_data.py", "scores.py", "diagnostics.py", "fit_process.py", "engines.py"):
        assert f"atlas_assets/model/{module}" in model_code, sorted(model_code)
    assert "atlas_assets/clean/chain.py" in manifest["clean_code"]
    assert "atlas_assets/registry/model_ids.py" in manifest["registry_code"]
    assert {"numpy", "pystan", "cmdstanpy", "arviz"} <= set(manifest["dependencies"])
    assert "model_config" in manifest["config"] and "stan/atlas.stan" in manifest["stan"]


def test_a_change_to_python_code_changes_the_fingerprint_and_is_named(tmp_path):
    root, package = copy_project(tmp_path)
    before = manifest_of(root, package)
    scores = package / "model" / "scores.py"
    scores.write_text(scores.read_text() + "\n# a headline rule changed\n")
    after = manifest_of(root, package)
    assert manifest_fingerprint(after) != manifest_fingerprint(before)
    assert changed_files(before, after) == {"model_code": ["atlas_assets/model/scores.py"]}


def test_checks_and_wiring_do_not_force_a_refit(tmp_path):
    root, package = copy_project(tmp_path)
    before = manifest_of(root, package)
    for path in (package / "defs" / "model" / "checks.py", package / "defs" / "model" / "assets.py",
                 package / "definitions.py", package / "storage.py", package / "defs" / "ops.py"):
        path.write_text((path.read_text() if path.exists() else "") + "\n# a clearer description\n")
    assert manifest_fingerprint(manifest_of(root, package)) == manifest_fingerprint(before)


def test_the_model_config_in_use_is_fingerprinted_under_one_name(tmp_path, monkeypatch):
    alternative = tmp_path / "alternative.yaml"
    alternative.write_text((settings.CONFIG_DIR / "model.yaml").read_text() + "\n# another sampler setting\n")
    packaged = specification_manifest()
    monkeypatch.setenv("ATLAS_MODEL_CONFIG", str(alternative))
    in_use = specification_manifest()
    assert changed_files(packaged, in_use) == {"config": ["model_config"]}


def test_downstream_stages_move_the_publication_fingerprint_but_not_the_fit(tmp_path):
    root, package = copy_project(tmp_path)
    fit_before = manifest_of(root, package)
    publication_before = specification_manifest(root, package, package / "config" / "model.yaml", scope="publication")
    for path in (package / "outputs" / "reliability.py", package / "validation" / "metrics.py",
                 package / "config" / "validation.yaml"):
        path.write_text(path.read_text() + "\n# a downstream change\n")
    sql = package / "outputs" / "sql" / "observation_rows.sql"  # a stage's own SQL shapes its numbers too
    sql.write_text(sql.read_text() + "\n-- a downstream change\n")
    fit_after = manifest_of(root, package)
    publication_after = specification_manifest(root, package, package / "config" / "model.yaml", scope="publication")
    assert manifest_fingerprint(fit_after) == manifest_fingerprint(fit_before)
    assert changed_files(publication_before, publication_after) == {
        "config": ["validation_config"],
        "outputs_code": ["atlas_assets/outputs/reliability.py", "atlas_assets/outputs/sql/observation_rows.sql"],
        "validation_code": ["atlas_assets/validation/metrics.py"],
    }


def test_a_cost_model_change_moves_the_cost_and_publication_fingerprints_but_not_the_fit(tmp_path):
    root, package = copy_project(tmp_path)
    model_config = package / "config" / "model.yaml"
    before = {scope: specification_manifest(root, package, model_config, scope=scope)
              for scope in ("fit", "cost", "publication")}
    for path in (root / "sql" / "08_cost_observations.sql", root / "stan" / "cost.stan",
                 package / "config" / "cost.yaml", package / "cost" / "data.py", package / "ingest" / "costs.py"):
        path.write_text(path.read_text() + "\n-- a cost change\n" if path.suffix == ".sql" else
                        path.read_text() + "\n// a cost change\n" if path.suffix == ".stan" else
                        path.read_text() + "\n# a cost change\n")
    # a cost column's unit in the benchmark registry is a cost change too
    registry = package / "config" / "benchmarks.yaml"
    text = registry.read_text()
    old = '"Average costs": {use: cost, cost_unit: usd_per_task, reason: "mean USD cost per task"}'
    assert old in text
    registry.write_text(text.replace(old, '"Average costs": {use: cost, cost_unit: usd_per_run, reason: "a fix"}'))
    after = {scope: specification_manifest(root, package, model_config, scope=scope)
             for scope in ("fit", "cost", "publication")}
    assert manifest_fingerprint(after["fit"]) == manifest_fingerprint(before["fit"])
    moved = {"config": ["atlas_assets/config/benchmarks.yaml", "atlas_assets/config/cost.yaml"],
             "cost_code": ["atlas_assets/cost/data.py", "atlas_assets/ingest/costs.py"],
             "sql": ["sql/08_cost_observations.sql"], "stan": ["stan/cost.stan"]}
    assert changed_files(before["cost"], after["cost"]) == moved
    assert changed_files(before["publication"], after["publication"]) == moved
    # the capability fit's own parts are not in the cost scope, and the cost model's not in the fit scope
    assert "stan/atlas.stan" not in after["cost"]["stan"] and "model_config" not in after["cost"]["config"]
    assert "cost_code" not in after["fit"] and "sql/08_cost_observations.sql" not in after["fit"]["sql"]


def test_a_score_column_change_in_the_registry_still_moves_the_fit(tmp_path):
    root, package = copy_project(tmp_path)
    before = manifest_of(root, package)
    registry = package / "config" / "benchmarks.yaml"
    text = registry.read_text()
    old = '"% Resolved": {use: score, benchmark: the_agent_company, headline: true}'
    assert old in text
    registry.write_text(text.replace(old, '"% Resolved": {use: score, benchmark: the_agent_company, headline: true, scale: 0.01}'))
    after = manifest_of(root, package)
    assert changed_files(before, after) == {"config": ["atlas_assets/config/benchmarks.yaml"]}
