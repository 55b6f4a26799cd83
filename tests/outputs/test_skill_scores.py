"""Skill scores per category on constructed data with known truth: a panel simulated from the fit's likelihood with
a true category deviation per state, read back through outputs/skill_scores.py with the true family parameters as
the "posterior". Asserts what a reader relies on: a state strong in one category and weak in another is ranked so,
90% intervals cover the true skill about 90% of the time, the learned deviation sd is near the true one, held-out
cells of a category are predicted better by the skill than by the general capability when categories differ, and
a state with one family in a category gets "not enough data" and no number."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from atlas_assets.outputs import skill_scores as S
from tests.outputs import tiny

CATEGORIES = {"coding": ["c0", "c1", "c2", "c3"], "math": ["m0", "m1", "m2", "m3"]}
B = [-1.0, -0.3, 0.3, 1.0]
BETA, KAPPA, ITEMS = 1.5, 150.0, 300
CFG = {"min_families": 2, "max_draws": 40,
       "deviation_sd": {"grid": [0.05, 0.15, 0.3, 0.5, 0.8, 1.2], "draws": 40, "min_states": 10}, "also_in": {}}


def simulate(n_states: int, tau: float, seed: int, special: dict[str, float] | None = None, n_draws: int = 40):
    """(draws, families, observations, states, membership, true phi_c per (state_pos, category))."""
    rng = np.random.default_rng(seed)
    names = [f for fams in CATEGORIES.values() for f in fams]
    families = pd.DataFrame({"family": names, "kind": "bounded", "floor": 0.0, "family_pos": np.arange(len(names))})
    phi = rng.standard_normal(n_states)
    truth, rows = {}, []
    for s in range(n_states):
        for c, fams in CATEGORIES.items():
            delta = (special or {}).get(c, 0.0) if s == 0 else tau * rng.standard_normal()
            truth[(s, c)] = phi[s] + delta
            for j, f in enumerate(fams):
                p = 1 / (1 + np.exp(-BETA * (truth[(s, c)] - B[j])))
                k = rng.binomial(ITEMS, rng.beta(p * KAPPA, (1 - p) * KAPPA))
                rows.append((s, f, "bounded", k / ITEMS, k, ITEMS))
    obs = pd.DataFrame(rows, columns=["state_pos", "family", "kind", "u", "correct", "items"])
    states = pd.DataFrame({"model": [f"m{s:02d}" for s in range(n_states)], "reasoning_state": "default"})
    b = np.tile(B, 2)
    draws = tiny.draws(phi[None, :] + 0.05 * rng.standard_normal((n_draws, n_states)), b[None, :].repeat(n_draws, 0),
                       BETA, kappa=KAPPA)
    membership = pd.DataFrame([(f, c, "test") for c, fams in CATEGORIES.items() for f in fams],
                              columns=["family", "category", "basis"])
    return draws, families, obs, states, membership, truth


@pytest.fixture(scope="module")
def strong_and_weak():
    draws, families, obs, states, membership, truth = simulate(40, 0.5, seed=4, special={"coding": 1.2, "math": -1.2})
    table, taus = S.skill_scores(draws, families, obs, states, membership, CFG, 0.9, seed=1)
    return table, taus, truth, (draws, families, obs, states, membership)


def test_a_state_strong_in_one_category_and_weak_in_another_is_ranked_so(strong_and_weak):
    table, _, truth, _ = strong_and_weak
    mine = table[table["state_pos"] == 0].set_index("category")
    assert (mine["status"] == S.PUBLISHED).all()
    assert mine.at["coding", "display_lower"] > mine.at["math", "display_upper"]
    # the general capability sits between the two skills, and the deviations carry the sign of the truth
    assert mine.at["math", "display_mean"] < mine.at["coding", "general_display_mean"] < mine.at["coding", "display_mean"]
    assert mine.at["coding", "deviation_lower"] > 0 > mine.at["math", "deviation_upper"]
    for c in CATEGORIES:
        assert abs(mine.at[c, "latent_mean"] - truth[(0, c)]) < 3 * mine.at[c, "latent_sd"] + 0.05


def test_intervals_cover_the_true_skill_and_the_deviation_sd_is_learned(strong_and_weak):
    table, taus, truth, _ = strong_and_weak
    pub = table[table["status"] == S.PUBLISHED]
    true = np.array([truth[(int(p), c)] for p, c in zip(pub["state_pos"], pub["category"])])
    covered = (pub["display_lower"].to_numpy() <= true) & (true <= pub["display_upper"].to_numpy())
    assert 0.8 <= covered.mean() <= 0.99, covered.mean()
    # the interval is about the skill, not the general capability: that one is off by the true deviation
    general_error = np.abs(pub["general_display_mean"].to_numpy() - true).mean()
    assert np.abs(pub["display_mean"].to_numpy() - true).mean() < 0.6 * general_error
    assert set(taus["deviation_sd"]) <= {0.3, 0.5, 0.8}, taus


def test_without_category_differences_the_deviation_shrinks_and_skill_follows_capability():
    draws, families, obs, states, membership, truth = simulate(20, 0.0, seed=9)
    table, taus = S.skill_scores(draws, families, obs, states, membership, CFG, 0.9, seed=1)
    assert (taus["deviation_sd"] <= 0.15).all(), taus
    pub = table[table["status"] == S.PUBLISHED]
    assert np.abs(pub["deviation_mean"]).mean() < 0.1 and np.abs(pub["deviation_mean"]).max() < 0.4


def test_heldout_cells_are_predicted_better_by_the_skill_than_by_the_general_capability(strong_and_weak):
    _, taus, _, (draws, families, obs, states, membership) = strong_and_weak
    keep = obs["state_pos"] < 8   # 8 states x 2 categories x 4 held-out families: enough, and fast
    cells = S.heldout_within_category(draws, families, obs[keep], states, membership, taus, seed=2)
    metrics = S.heldout_metrics(cells).set_index(["category", "method"])
    assert metrics.loc[("all", "skill"), "n_cells"] == metrics.loc[("all", "general"), "n_cells"] == 8 * 2 * 4
    assert metrics.loc[("all", "skill"), "crps"] < metrics.loc[("all", "general"), "crps"]
    assert metrics.loc[("all", "skill"), "rmse"] < metrics.loc[("all", "general"), "rmse"]
    assert metrics.loc[("all", "skill"), "coverage_90"] >= 0.8


def test_one_family_in_a_category_is_not_enough_data():
    draws, families, obs, states, membership, _ = simulate(12, 0.3, seed=5)
    thin = obs[(obs["state_pos"] != 3) | obs["family"].isin(["c0", "m0", "m1", "m2"])]
    taus = pd.DataFrame({"category": list(CATEGORIES), "deviation_sd": [0.3, 0.3]})
    table, _ = S.skill_scores(draws, families, thin, states, membership, CFG, 0.9, seed=1, taus=taus)
    assert len(table) == 12 * 2
    row = table[(table["state_pos"] == 3) & (table["category"] == "coding")].iloc[0]
    assert row["status"].startswith(S.NOT_ENOUGH) and "1 family in coding" in row["status"]
    assert np.isnan(row[["display_mean", "display_lower", "display_upper", "latent_mean"]].to_numpy(float)).all()
    math = table[(table["state_pos"] == 3) & (table["category"] == "math")].iloc[0]
    assert math["status"] == S.PUBLISHED and math["n_families"] == 3 and np.isfinite(math["display_mean"])


def test_family_categories_come_from_the_primary_benchmark():
    registry = pd.DataFrame([
        ("suite", "primary", "general"), ("suite", "component", "math"), ("suite", "component", "coding"),
        ("tiers", "component", "agents"), ("tiers", "component", "agents"), ("gpqa", "primary", "science"),
    ], columns=["family", "role", "category"])
    out = S.family_categories(registry, ["suite", "tiers", "gpqa", "unregistered"], {"gpqa": ["reasoning"]})
    got = out.groupby("family")["category"].agg(lambda c: sorted(c.dropna())).to_dict()
    assert got == {"gpqa": ["reasoning", "science"], "suite": ["general"], "tiers": ["agents"], "unregistered": []}
    assert out.loc[out["family"] == "unregistered", "basis"].str.contains("not in the registry").all()


# ----------------------------------------------------------------------------------------------- calibrated states


def newcomer_world(skill: dict[str, float], theta_prior: tuple[float, float], seed: int, n_draws: int = 200,
                   families_per_category: dict[str, int] | None = None):
    """A fitted population (40 states around N(0, 1)) and one model outside the fit, "newcomer", with ONE continuous
    result per family (thin evidence, as calibrate-in's models have), each exactly its expected score at the model's
    true skill in the family's category, calibrated in under a theta prior N(theta_prior) (the fit's release trend
    places a new model there). Returns (draws, families, membership, calibration, reasoning, theta priors)."""
    from atlas_assets.outputs import calibrate as C

    rng = np.random.default_rng(seed)
    per = families_per_category or {"coding": 2, "math": 2}
    names = [f"{c[0]}{j}" for c, n in per.items() for j in range(n)]
    families = pd.DataFrame({"family": names, "kind": "bounded", "floor": 0.0, "family_pos": np.arange(len(names))})
    b = np.linspace(-0.5, 2.0, len(names))
    kappa = 8.0
    rows = []
    for j, name in enumerate(names):
        category = next(c for c in per if name.startswith(c[0]))
        p = 1 / (1 + np.exp(-BETA * (skill[category] - b[j])))
        rows.append(("newcomer", "default", name, "bounded", float(p), None, None))
    obs = pd.DataFrame(rows, columns=["model", "reasoning_state", "family", "kind", "u", "correct", "items"])
    draws = tiny.draws(rng.standard_normal((n_draws, 40)), b[None, :].repeat(n_draws, 0), BETA, kappa=kappa)
    zeros = np.zeros(n_draws)
    reasoning = C.ReasoningDraws(ladder=("low", "medium", "high"), off_ladder=(), default="default", pin_preference=(),
                                 shared_effect=np.zeros((n_draws, 3)), shared_sd=zeros + 0.3, amp_sd=zeros + 0.3,
                                 curv_sd=zeros + 0.1, offdev_sd=np.zeros((n_draws, 0)))
    priors = {"newcomer": C.ThetaPrior(np.full(n_draws, theta_prior[0]), np.full(n_draws, theta_prior[1]),
                                       "release_trend")}
    calibration = C.calibrate(draws, reasoning, families, C.likelihood_pieces(obs, families), seed=3,
                              theta_priors=priors)
    membership = pd.DataFrame([(f, next(c for c in per if f.startswith(c[0])), "test") for f in names],
                              columns=["family", "category", "basis"])
    return draws, families, membership, calibration, reasoning, priors


def test_a_calibrated_state_without_a_category_deviation_reads_back_its_calibrate_in_capability():
    """With tau -> 0 a skill is the state's capability from all its results under its prior. For a model calibrated
    in, that prior is calibrate-in's (here its release-trend prior, far above the fitted population), so each skill
    must read back the calibrated capability: deviation ~ 0. Under the fitted states' population prior instead, two
    thin results per category would pull both skills ~0.2 latent units below it."""
    draws, families, membership, calibration, reasoning, priors = newcomer_world(
        {"coding": 2.0, "math": 2.0}, theta_prior=(2.0, 0.3), seed=11)
    taus = pd.DataFrame({"category": ["coding", "math"], "deviation_sd": [0.01, 0.01]})
    cfg = {**CFG, "max_draws": 200}
    table = S.calibrated_skill_scores(draws, families, calibration, reasoning, priors, membership, taus, cfg, 0.9,
                                      seed=1).set_index("category")
    calibrated = calibration.phi[:, 0]
    assert (table["status"] == S.PUBLISHED).all() and (table["path"] == "calibrated").all()
    assert table["theta_prior"].eq("release_trend").all() and table["category_rank"].isna().all()
    for category in ("coding", "math"):
        assert table.at[category, "general_display_mean"] == pytest.approx(calibrated.mean())
        assert abs(table.at[category, "latent_mean"] - calibrated.mean()) < 0.06, (category, table, calibrated.mean())
        assert abs(table.at[category, "deviation_mean"]) < 0.06
        assert table.at[category, "latent_sd"] == pytest.approx(calibrated.std(), rel=0.25)


def test_a_calibrated_state_strong_in_one_category_and_weak_in_another_and_the_not_enough_data_rule():
    draws, families, membership, calibration, reasoning, priors = newcomer_world(
        {"coding": 2.5, "math": -0.5, "science": 1.0}, theta_prior=(1.0, 0.5), seed=12,
        families_per_category={"coding": 3, "math": 3, "science": 1})
    taus = pd.DataFrame({"category": ["coding", "math", "science"], "deviation_sd": [0.8, 0.8, 0.8]})
    table = S.calibrated_skill_scores(draws, families, calibration, reasoning, priors, membership, taus, CFG, 0.9,
                                      seed=1).set_index("category")
    assert list(table.columns[:len(S.TABLE_COLUMNS) - 1]) == [c for c in S.TABLE_COLUMNS if c != "category"]
    assert table.at["coding", "display_lower"] > table.at["math", "display_upper"]
    assert table.at["coding", "deviation_lower"] > 0 > table.at["math", "deviation_upper"]
    # one science family: the fitted states' rule, no number
    science = table.loc["science"]
    assert science["status"].startswith(S.NOT_ENOUGH) and "1 family in science" in science["status"]
    assert np.isnan(science[list(S.SUMMARY_COLUMNS)].to_numpy(float)).all() and science["path"] == "calibrated"


def test_calibrate_in_priors_of_a_pinned_and_a_ladder_state():
    """The pinned state's prior is the model's theta prior shifted by its setting's shared effect; a state that
    carries the model's ladder terms is wider by their prior spread on its contrasts."""
    from atlas_assets.outputs import calibrate as C

    D = 5
    reasoning = C.ReasoningDraws(ladder=("low", "medium", "high"), off_ladder=("enabled",), default="default",
                                 pin_preference=(), shared_effect=np.tile([-0.4, 0.0, 0.5, 0.2], (D, 1)),
                                 shared_sd=np.full(D, 0.3), amp_sd=np.full(D, 0.4), curv_sd=np.full(D, 0.2),
                                 offdev_sd=np.full((D, 1), 0.25))
    layout = C.state_layout({"high": 3, "low": 1, "enabled": 1}, reasoning).states.assign(cal_pos=lambda f: f.index,
                                                                                           model="m")
    priors = S.calibrated_priors(layout, reasoning, {"m": C.ThetaPrior(np.full(D, 1.0), np.full(D, 0.5))})
    by_state = {row.reasoning_state: priors[row.cal_pos] for row in layout.itertuples()}
    low = layout.set_index("reasoning_state").loc["low"]
    assert layout.set_index("reasoning_state").at["high", "pinned"]
    assert by_state["high"].mean == pytest.approx(np.full(D, 1.5)) and by_state["high"].sd == pytest.approx(np.full(D, 0.5))
    assert by_state["low"].mean == pytest.approx(np.full(D, 0.6))
    assert by_state["low"].sd == pytest.approx(np.sqrt(0.25 + (low["d_lin"] * 0.4) ** 2 + (low["d_quad"] * 0.2) ** 2))
    assert by_state["enabled"].mean == pytest.approx(np.full(D, 1.2))
    assert by_state["enabled"].sd == pytest.approx(np.full(D, np.sqrt(0.25 + 0.25 ** 2)))


def test_calibrated_skills_refuse_deviations_that_are_not_the_fits(tmp_path):
    """The calibrated states' skills borrow the deviation sd the fitted states learned: missing, or learned on another
    fit, is a refusal naming the table and what to materialize, never a silent default."""
    import dagster as dg
    import duckdb
    from dagster_duckdb import DuckDBResource

    from atlas_assets.defs.outputs.skill_scores import skill_deviations_of

    path = tmp_path / "atlas.duckdb"
    resource = DuckDBResource(database=str(path))
    with pytest.raises(dg.Failure, match="skill_deviations is not readable.*materialize skill_scores for this fit"):
        skill_deviations_of(resource, "good")
    with duckdb.connect(str(path)) as conn:
        conn.execute("CREATE TABLE skill_deviations AS SELECT * FROM (VALUES ('coding', 0.3, 'older'), "
                     "('math', 0.2, 'older')) AS t(category, deviation_sd, fit)")
    with pytest.raises(dg.Failure, match=r"skill_deviations is of fit \['older'\], not good"):
        skill_deviations_of(resource, "good")
    with duckdb.connect(str(path)) as conn:
        conn.execute("UPDATE skill_deviations SET fit = 'good'")
    taus = skill_deviations_of(resource, "good")
    assert dict(zip(taus["category"], taus["deviation_sd"])) == {"coding": 0.3, "math": 0.2}


def test_the_calibrated_skill_check_catches_an_invented_number_a_borrowed_sd_and_a_rank(tmp_path):
    import duckdb
    from dagster_duckdb import DuckDBResource

    from atlas_assets.defs.outputs.calibrated_checks import calibrated_skill_scores_valid

    draws, families, membership, calibration, reasoning, priors = newcomer_world(
        {"coding": 2.0, "math": 1.0, "science": 1.5}, theta_prior=(1.5, 0.4), seed=5, n_draws=60,
        families_per_category={"coding": 2, "math": 2, "science": 1})
    taus = pd.DataFrame({"category": ["coding", "math", "science"], "deviation_sd": 0.3})
    good = S.calibrated_skill_scores(draws, families, calibration, reasoning, priors, membership, taus, CFG, 0.9,
                                     seed=1).assign(fit="f")
    path = tmp_path / "atlas.duckdb"

    def check(skills):
        with duckdb.connect(str(path)) as conn:
            for name, frame in {"calibrated_skill_scores": skills, "skill_deviations": taus.assign(fit="f"),
                                "calibrated_states": calibration.states.assign(fit="f")}.items():
                conn.register("frame", frame)
                conn.execute(f"CREATE OR REPLACE TABLE {name} AS SELECT * FROM frame")
                conn.unregister("frame")
        result = calibrated_skill_scores_valid(duckdb=DuckDBResource(database=str(path)))
        return result.passed, result.metadata["problems"].value

    assert check(good) == (True, [])
    science = good["category"] == "science"
    invented = good.copy()
    invented.loc[science, "display_mean"] = 140.0
    assert "a number on a 'not enough data' row" in check(invented)[1]
    borrowed = good.assign(deviation_sd=np.where(science, 0.6, good["deviation_sd"]))
    assert any("learned (skill_deviations)" in p for p in check(borrowed)[1])
    ranked = good.assign(category_rank=np.where(good["status"] == S.PUBLISHED, 1.0, np.nan))
    assert any("ranked" in p for p in check(ranked)[1])
