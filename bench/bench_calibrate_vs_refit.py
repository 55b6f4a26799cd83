"""Calibrate-in against a full refit that includes the same models (issue 13), on simulated data with known truth.

    .venv/bin/python bench/bench_calibrate_vs_refit.py [--models 70] [--families 14] [--obs 620] [--thin 16]
        [--keep 2] [--seed 5] [--out /tmp/calibrate_vs_refit]

A panel is simulated (atlas_assets.model.simulate: the generative story, independent of calibrate.py). `--thin`
models (never a display reference) keep `--keep` of their observations each, the rest of theirs is discarded:
they are the thin, newly arrived models. Two ways to place them:
  full refit: the production program fitted to everything (the other models + the thin models' few rows);
  calibrate-in: the program fitted to the other models only, the thin models then calibrated onto that fit
                (outputs/calibrate.py, program prior N(0, 1): a simulated panel has no release dates).
Both are compared with the truth on the display scale (130 and 150 at the two reference states, per draw for the
fits, through the true capabilities of the references for the truth): error of the posterior mean, coverage of
the truth by the 50% and 90% intervals, mean 90% width, and the time each took. Sampling follows model.yaml's
preconditioned production sampler with shorter chains (printed); no timing depends on another process.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

PROJECT_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(PROJECT_ROOT))

from atlas_assets.model.fit_process import load_fit, run_fit  # noqa: E402
from atlas_assets.model.simulate import simulate_panel, simulated_references  # noqa: E402
from atlas_assets.model.stan_data import load_model_config  # noqa: E402
from atlas_assets.outputs import calibrate as C  # noqa: E402
from atlas_assets.outputs.draws import from_fit  # noqa: E402

SAMPLER = {"chains": 4, "draws": 500, "precondition": {"pilot_chains": 4, "pilot_warmup": 150, "pilot_draws": 150,
                                                      "main_warmup": 300}}


def truth_display(truth, references: dict) -> pd.Series:
    lo, hi = references["low"], references["high"]
    phi_lo = truth.phi[f"{lo['model']}|{lo['reasoning_state']}"]
    phi_hi = truth.phi[f"{hi['model']}|{hi['reasoning_state']}"]
    return lo["value"] + (hi["value"] - lo["value"]) * (truth.phi - phi_lo) / (phi_hi - phi_lo)


def summarize(name: str, disp: np.ndarray, keys: list[str], truth_disp: pd.Series, seconds: float) -> dict:
    t = truth_disp[keys].to_numpy()
    lo50, hi50, lo90, hi90 = np.quantile(disp, [0.25, 0.75, 0.05, 0.95], axis=0)
    mean = disp.mean(axis=0)
    return {"method": name, "states": len(keys), "rmse_display": float(np.sqrt(np.mean((mean - t) ** 2))),
            "mae_display": float(np.mean(np.abs(mean - t))), "bias_display": float(np.mean(mean - t)),
            "coverage_50": float(np.mean((t >= lo50) & (t <= hi50))), "coverage_90": float(np.mean((t >= lo90) & (t <= hi90))),
            "width_90": float(np.mean(hi90 - lo90)), "seconds": round(seconds, 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", type=int, default=70)
    parser.add_argument("--families", type=int, default=14)
    parser.add_argument("--obs", type=int, default=620)
    parser.add_argument("--thin", type=int, default=16)
    parser.add_argument("--keep", type=int, default=2)
    parser.add_argument("--seed", type=int, default=5)
    parser.add_argument("--out", type=Path, default=Path("/tmp/calibrate_vs_refit"))
    args = parser.parse_args()

    cfg = load_model_config(overrides={"sampler": SAMPLER})
    panel, truth = simulate_panel(n_models=args.models, n_families=args.families, target_obs=args.obs, seed=args.seed,
                                  config=cfg)
    references = simulated_references(panel, truth)
    cfg["display"]["reference"] = references
    rng = np.random.default_rng(args.seed)
    protected = {references["low"]["model"], references["high"]["model"]}
    per_model = panel.groupby("model").size()
    eligible = sorted(m for m in per_model.index if m not in protected and per_model[m] > args.keep)
    thin = sorted(rng.choice(eligible, size=min(args.thin, len(eligible)), replace=False).tolist())
    kept_rows = [rows.sample(n=args.keep, random_state=int(rng.integers(1 << 31)))
                 for _, rows in panel[panel["model"].isin(thin)].groupby("model")]
    evidence = pd.concat(kept_rows, ignore_index=True)
    others = panel[~panel["model"].isin(thin)].reset_index(drop=True)
    full = pd.concat([others, evidence], ignore_index=True)
    print(f"panel: {len(panel)} observations, {panel['model'].nunique()} models, {panel['family'].nunique()} families; "
          f"{len(thin)} thin models keep {args.keep} observations each ({len(evidence)} rows); sampler {SAMPLER}",
          flush=True)

    fits = {}
    for name, data in (("main", others), ("full_refit", full)):
        out = args.out / name
        t0 = time.perf_counter()
        summary = run_fit(data, out, cfg, log=lambda m: None)
        fits[name] = (load_fit(out), time.perf_counter() - t0, summary)
        d = summary.get("diagnostics", summary)
        print(f"  fit {name}: {time.perf_counter() - t0:.0f} s, max R-hat {d.get('max_rhat')}, min bulk ESS "
              f"{d.get('min_ess_bulk')}, divergences {d.get('divergences')}", flush=True)

    disp_truth = truth_display(truth, references)
    states = evidence[["model", "reasoning_state"]].drop_duplicates()
    keys = [f"{m}|{s}" for m, s in zip(states["model"], states["reasoning_state"])]

    refit, refit_seconds, _ = fits["full_refit"]
    draws_full = from_fit(refit)
    st = refit.stan_input.states.set_index(["model", "reasoning_state"])["state_pos"]
    pos = [int(st[(m, s)]) for m, s in zip(states["model"], states["reasoning_state"])]
    rows = [summarize("full refit", draws_full.display(draws_full.phi[:, pos]), keys, disp_truth, refit_seconds)]

    main_fit, main_seconds, _ = fits["main"]
    draws_main = from_fit(main_fit)
    si = main_fit.stan_input
    pieces = C.likelihood_pieces(evidence[evidence["family"].isin(set(si.families["family"]))], si.families)
    t0 = time.perf_counter()
    cal = C.calibrate(draws_main, C.reasoning_draws_from_fit(main_fit), si.families, pieces[pieces["drop_reason"].isna()],
                      seed=args.seed)
    cal_seconds = time.perf_counter() - t0
    cpos = cal.states.set_index(["model", "reasoning_state"])["cal_pos"]
    cols = [int(cpos[(m, s)]) for m, s in zip(states["model"], states["reasoning_state"])]
    rows.append(summarize("calibrate-in", draws_main.display(cal.phi[:, cols]), keys, disp_truth, cal_seconds))
    table = pd.DataFrame(rows)
    print(table.to_string(index=False, float_format=lambda x: f"{x:.3f}"))
    print(f"calibrate-in needs the main fit once ({main_seconds:.0f} s, shared by every later arrival) and then "
          f"{cal_seconds:.1f} s for {len(thin)} models; the full refit took {refit_seconds:.0f} s")


if __name__ == "__main__":
    main()
