"""The report's cost section, built from a published folder only: the cheapest and dearest states with their
90% intervals and workload dollars as published, the Pareto-optimal states of the frontier with P(frontier); or,
when the latest cost fit failed its gates, a plain note naming the gate and no cost table."""

from __future__ import annotations

import json
import shutil

import duckdb
import numpy as np
import pandas as pd
from atlas_assets.publish import store
from atlas_assets.publish.artifacts import collect_publication
from atlas_assets.publish.config import load_publish_config
from atlas_assets.publish.report import REPORT_FILE, build_report
from tests.publish.fixtures import make_home
from tests.publish.test_publish_report import TableRows

COST_FIT = "c0c0c0c0c0c0c0c0-d1d1d1d1d1d1d1d1-c4w500d1000s7"
FAILED_FIT = "e2e2e2e2e2e2e2e2-f3f3f3f3f3f3f3f3-c4w500d1000s7.failed"


def cost_tables(fit: str, n: int = 24) -> dict[str, pd.DataFrame]:
    """n states with distinct cost indices (state k costs 10 ^ ((k - 12) / 8)), two workloads, and a frontier in
    which every third state is Pareto-optimal."""
    k = np.arange(n)
    log10 = (k - 12) / 8.0
    index = pd.DataFrame({
        "model": [f"m{i:03d}" for i in k], "reasoning_state": ["high" if i % 2 else "default" for i in k],
        "is_reference": k == 12, "cost_index_median": 10 ** log10, "cost_index_lower": 10 ** (log10 - 0.1),
        "cost_index_upper": 10 ** (log10 + 0.2), "n_runs": k % 5 + 1,
        "usd_short_answer_median": 0.05 * 10 ** log10, "usd_short_answer_lower": 0.04 * 10 ** log10,
        "usd_short_answer_upper": 0.07 * 10 ** log10, "usd_short_answer_benchmarks": "aider_polyglot",
        "usd_agentic_median": 0.9 * 10 ** log10, "usd_agentic_lower": 0.6 * 10 ** log10,
        "usd_agentic_upper": 1.3 * 10 ** log10, "usd_agentic_benchmarks": "swe_bench_verified",
        "cost_fit": COST_FIT}).sample(frac=1.0, random_state=5)
    frontier = pd.DataFrame({
        "model": index.model, "reasoning_state": index.reasoning_state,
        "capability_median": 100 + 2.0 * np.arange(n), "cost_index_median": index.cost_index_median,
        "pareto_optimal": np.arange(n) % 3 == 0, "p_frontier": np.linspace(0.05, 0.95, n), "fit": fit,
        "cost_fit": COST_FIT})
    return {"cost_index": index, "cost_frontier": frontier}


def failed_diagnostics() -> dict:
    return {"passes": False, "max_rhat": 1.065, "min_ess_bulk": 40.0, "min_ess_tail": 13.0, "divergences": 623,
            "min_ebfmi": 0.49, "worst_rhat": [["state_cost[x|high]", 1.065]],
            "worst_ess_bulk": [["state_cost[x|high]", 40.0]], "worst_ess_tail": [["state_cost[y|low]", 13.0]],
            "checks": {"rhat": False, "ess_bulk": False, "ess_tail": False, "divergences": False, "ebfmi": True},
            "thresholds": {"rhat_max": 1.01, "ess_bulk_min": 400, "ess_tail_min": 400, "divergences_max": 0,
                           "ebfmi_min": 0.3}}


def report_of(root, monkeypatch, bundle, *, replace=None, latest=None, latest_diagnostics=None):
    """Publish the fixture fit (with `replace` tables; `latest`: the newest cost fit's folder name, written with
    `latest_diagnostics`), delete its ATLAS_HOME, build the report; (version folder, page html)."""
    home = root / "home"
    monkeypatch.setenv("ATLAS_HOME", str(home))
    fit_dir = make_home(home, bundle, replace=replace)
    passed = home / "model" / "cost_fits" / COST_FIT
    passed.mkdir(parents=True)
    (passed / "fit_summary.json").write_text(json.dumps({"passes": True, "max_rhat": 1.0057, "min_ess_bulk": 1228,
                                                          "min_ess_tail": 1651, "divergences": 0, "min_ebfmi": 0.78}))
    latest_dir = None
    if latest is not None:
        latest_dir = home / "model" / "cost_fits" / latest
        latest_dir.mkdir(parents=True, exist_ok=True)
        (latest_dir / "diagnostics.json").write_text(json.dumps(latest_diagnostics))
    with duckdb.connect(str(home / "atlas.duckdb")) as conn:
        publication = collect_publication(conn, fit_dir, latest_cost_fit=latest_dir)
    folder = store.publish(publication, root / "publications").folder
    shutil.rmtree(home)
    out = root / "report"
    out.mkdir()
    build_report(folder, out, load_publish_config()["report"])
    return folder, (out / REPORT_FILE).read_text()


def rows_of(page: str, table_id: str) -> list[list[str]]:
    parser = TableRows(table_id)
    parser.feed(page)
    return [row for row in parser.rows if row]


def test_report_shows_the_cheapest_and_dearest_states_and_the_frontier_as_published(tmp_path, monkeypatch, bundle):
    folder, page = report_of(tmp_path, monkeypatch, bundle, replace=cost_tables(bundle.fit),
                             latest=COST_FIT, latest_diagnostics={"passes": True})
    assert '<section id="cost">' in page and COST_FIT in page
    assert "max R-hat 1.0057, min bulk / tail ESS 1228 / 1651, 0 divergences" in page
    index = pd.read_csv(folder / "cost_index.csv").sort_values("cost_index_median")
    n = load_publish_config()["report"]["cost_rows"]
    cheapest, dearest = rows_of(page, "cost-cheapest"), rows_of(page, "cost-dearest")
    assert [r[0] for r in cheapest] == list(index.model[:n])
    assert [r[0] for r in dearest] == list(index.model[::-1][:n])
    top = index.iloc[-1]
    assert dearest[0][2:4] == [f"{top.cost_index_median:.3f}", f"{top.cost_index_lower:.3f} – {top.cost_index_upper:.3f}"]
    assert dearest[0][4] == (f"{top.usd_short_answer_median:.3g} ({top.usd_short_answer_lower:.3g} – "
                             f"{top.usd_short_answer_upper:.3g})")
    assert cheapest[0][5].startswith(f"{index.usd_agentic_median.iloc[0]:.3g} (") and dearest[0][6] == str(top.n_runs)
    frontier = pd.read_csv(folder / "cost_frontier.csv")
    on = frontier[frontier.pareto_optimal].sort_values("capability_median", ascending=False)
    shown = rows_of(page, "cost-frontier")
    assert [r[0] for r in shown] == list(on.model) and len(shown) == 8
    assert [r[4] for r in shown] == [f"{p:.2f}" for p in on.p_frontier]
    assert "failed its convergence gates" not in page


def test_report_says_plainly_that_the_cost_fit_failed_and_shows_no_cost_table(tmp_path, monkeypatch, bundle):
    _, page = report_of(tmp_path, monkeypatch, bundle, latest=FAILED_FIT, latest_diagnostics=failed_diagnostics())
    assert f"The latest cost fit {FAILED_FIT} failed its convergence gates" in page
    assert "max_rhat = 1.065 against the limit 1.01" in page and "divergences = 623" in page
    assert "No cost table is published." in page
    assert 'id="cost-cheapest"' not in page and 'id="cost-frontier"' not in page


def test_report_keeps_the_last_good_cost_tables_and_names_the_failed_newer_fit(tmp_path, monkeypatch, bundle):
    _, page = report_of(tmp_path, monkeypatch, bundle, replace=cost_tables(bundle.fit), latest=FAILED_FIT,
                        latest_diagnostics=failed_diagnostics())
    assert f"The latest cost fit {FAILED_FIT} failed its convergence gates" in page
    assert "The tables below are from the last cost fit that passed." in page
    assert len(rows_of(page, "cost-cheapest")) == load_publish_config()["report"]["cost_rows"]


def test_report_without_any_cost_fit_says_none_is_published(tmp_path, monkeypatch, bundle):
    _, page = report_of(tmp_path, monkeypatch, bundle)
    assert "No cost table is published: this publication has no cost_index rows" in page
    assert "failed its convergence gates" not in page
