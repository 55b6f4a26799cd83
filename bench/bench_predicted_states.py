"""Predicted reasoning settings on a production fit: the formula's proof, how many pairs and cells, seconds.

    .venv/bin/python bench/bench_predicted_states.py [--fit-dir var/model/fits/<name>]
        [--registry var/atlas.duckdb | DIR with registry_models.pkl, registry_model_ids.pkl, registry_benchmarks.pkl]
        [--show 25]

Prints the largest |rebuilt phi - fit's phi| over every observed state and draw (must be < 1e-8), the
plausible unobserved (model, setting) pairs by setting and by basis, the cells, the seconds of each step,
and the predicted states with the highest posterior mean. The registry is read once (DuckDB read-only,
with retries while another process writes it), or from a directory of pickled copies.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import pandas as pd

PROJECT_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(PROJECT_ROOT))

from atlas_assets import settings  # noqa: E402
from bench.fits import latest_passing_fit  # noqa: E402

TABLES = ("registry_models", "registry_model_ids", "registry_benchmarks")


def read_registry(source: Path) -> dict[str, pd.DataFrame | None]:
    if source.is_dir():
        return {t: pd.read_pickle(source / f"{t}.pkl") if (source / f"{t}.pkl").exists() else None for t in TABLES}
    import duckdb

    for attempt in range(30):
        try:
            conn = duckdb.connect(str(source), read_only=True)
            break
        except duckdb.Error:
            time.sleep(2)
    else:
        raise SystemExit(f"{source}: could not open read-only")
    try:
        return {t: conn.execute(f"SELECT * FROM {t}").df() for t in TABLES}
    finally:
        conn.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--fit-dir", type=Path)
    parser.add_argument("--registry", type=Path, default=settings.atlas_home() / "atlas.duckdb")
    parser.add_argument("--show", type=int, default=25)
    args = parser.parse_args()

    from atlas_assets.model.fit_process import load_fit
    from atlas_assets.model.scores import rank_eligible
    from atlas_assets.outputs.cell_predictions import family_score_scales
    from atlas_assets.outputs.config import load_outputs_config
    from atlas_assets.outputs.draws import from_fit
    from atlas_assets.outputs.predicted_states import predict_states, reasoning_posterior, setting_plausibility
    from atlas_assets.registry.model_ids import load_model_overrides

    fit_dir = args.fit_dir or latest_passing_fit()
    t0 = time.perf_counter()
    loaded = load_fit(fit_dir)
    cfg = load_outputs_config()
    max_draws = int(cfg["draws"]["max_draws"])
    draws = from_fit(loaded).thin(max_draws)
    post = reasoning_posterior(loaded.idata).thin(max_draws)
    t_load = time.perf_counter() - t0
    si = loaded.stan_input

    t0 = time.perf_counter()
    reg = read_registry(args.registry)
    overrides = load_model_overrides()
    plaus = setting_plausibility(si.states, si.config, reg["registry_models"], reg["registry_model_ids"],
                                 overrides.no_reasoning_mode, overrides.reasoning_products,
                                 si.models.set_index("model")["released_on"].to_dict()
                                 if "released_on" in si.models else None)
    t_rule = time.perf_counter() - t0
    scales = family_score_scales(si.families, reg["registry_benchmarks"])
    result = predict_states(post, draws, si, cfg, plaus, rank_eligible(si, si.config), scales)

    print(f"fit {fit_dir.name}: {si.data['M']} models, {si.data['S']} observed states, {si.data['J']} families, "
          f"{draws.n_draws} draws")
    print(f"reconstruction: max |rebuilt phi - fit phi| over {si.data['S']} observed states x {draws.n_draws} draws "
          f"= {result.reconstruction_error:.3g}")
    pred = result.states
    print(f"predicted (model, setting) pairs: {len(pred)} over {pred['model'].nunique()} models "
          f"(unobserved pairs not predicted: {len(result.exclusions)})")
    print("  by setting:", pred["reasoning_state"].value_counts().to_dict())
    print("  terms:", pred.groupby(["ladder_terms", "deviation"]).size().to_dict())
    reasons = result.exclusions["reason"].str.replace(r"(first published \S+ for )\S+ \(.*", r"\1...", regex=True)
    print("  not predicted, by reason:", reasons.str.slice(0, 70).value_counts().head(8).to_dict())
    print(f"cells: {len(result.cells)} ({pred.shape[0]} states x {si.data['J']} families)")
    scores = pd.read_csv(fit_dir / "state_scores.csv")
    measured = scores[scores.display_upper > scores.display_lower]
    narrowest = (measured.display_upper - measured.display_lower).groupby(measured.model).min()
    width = pred.display_upper - pred.display_lower
    sure = pred[width < pred.model.map(narrowest) - 1e-9]
    print(f"predicted intervals narrower than the model's narrowest measured one: {len(sure)}"
          + (f" {list(zip(sure.model, sure.reasoning_state))[:8]}" if len(sure) else ""))
    print(f"predicted states with P(rank 1) >= 0.5: {int((pred.p_rank1 >= 0.5).sum())}")
    print(f"seconds: load {t_load:.1f}, rule {t_rule:.2f}, predict (phi + tables + cells) {result.seconds:.1f}")
    cols = ["model", "reasoning_state", "observed_states", "display_mean", "display_lower", "display_upper",
            "p_above_model_headline", "expected_rank", "ladder_terms", "deviation"]
    with pd.option_context("display.width", 250, "display.max_columns", 20, "display.max_colwidth", 40):
        print(pred.sort_values("display_mean", ascending=False)[cols].head(args.show).to_string(index=False))


if __name__ == "__main__":
    main()
