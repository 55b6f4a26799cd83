"""Publication gates on constructed states: each route, the lineage rule and eligibility decide as publish.yaml says,
the reason names what is missing, and the published score tables say "not enough evidence" for a failing headline
while the fit's own numbers stay."""

from __future__ import annotations

import pandas as pd
import pytest

from atlas_assets.config_schema import ConfigError
from atlas_assets.publish import gates as G
from atlas_assets.publish.config import load_publish_config

CATEGORY = {"swe_verified": "coding", "swe_lite": "coding", "aider": "coding", "arc": "reasoning", "gpqa": "science",
            "mmlu": "knowledge", "math5": "math", "tau": "agents"}
MEMBERSHIP = pd.DataFrame([(f, c, "test") for f, c in CATEGORY.items()], columns=["family", "category", "basis"])
CFG = {"min_lineages": 2, "lineages": {"swe_verified": "swe_bench", "swe_lite": "swe_bench"},
       "routes": {"breadth": {"min_families": 4, "min_categories": 2, "one_of_categories": ["reasoning", "coding"]},
                  "precision": {"min_families": 3, "max_interval_width": 15.6}}}

STATES = {  # model: (families, 90% interval width, rank-eligible)
    "broad": (["swe_verified", "arc", "gpqa", "mmlu"], 30.0, True),        # breadth only
    "precise": (["gpqa", "mmlu", "math5"], 10.0, True),                    # precision only
    "wide_three": (["gpqa", "mmlu", "math5"], 20.0, True),                 # neither: 3 families, wide
    "no_core": (["gpqa", "mmlu", "math5", "tau"], 20.0, True),             # 4 families, none in reasoning/coding
    "one_lineage": (["swe_verified", "swe_lite"], 5.0, True),              # 2 families of one lineage
    "not_eligible": (["swe_verified", "arc", "gpqa", "mmlu"], 5.0, False),
}


def frames():
    obs = pd.DataFrame([(m, "default", f) for m, (fams, _, _) in STATES.items() for f in fams],
                       columns=["model", "reasoning_state", "family"])
    scores = pd.DataFrame([{"model": m, "reasoning_state": "default", "state_pos": i, "eligible": e,
                            "display_mean": 120.0 + i, "display_lower": 120.0 + i - w / 2,
                            "display_upper": 120.0 + i + w / 2} for i, (m, (_, w, e)) in enumerate(STATES.items())])
    models = pd.DataFrame({"model": list(STATES), "headline_state": "default", "display_mean": scores["display_mean"],
                           "headline_status": "published"})
    return obs, scores, models


def test_each_route_lineage_and_eligibility_decide_with_a_reason():
    obs, scores, models = frames()
    out = G.headline_gates(scores, obs, MEMBERSHIP, models, CFG).set_index("model")
    assert out["gate_pass"].to_dict() == {"broad": True, "precise": True, "wide_three": False, "no_core": False,
                                          "one_lineage": False, "not_eligible": False}
    assert out.at["broad", "routes_passed"] == "breadth" and out.at["precise", "routes_passed"] == "precision"
    assert "precision: 90% interval 20.0 > 15.6" in out.at["wide_three", "reason"]
    assert "breadth: 3 families < 4" in out.at["wide_three", "reason"]
    assert "no family in reasoning or coding" in out.at["no_core", "reason"]
    assert out.at["one_lineage", "n_lineages"] == 1 and out.at["one_lineage", "lineages"] == "swe_bench"
    assert out.at["one_lineage", "reason"].startswith("results from 1 lineage < 2")
    assert out.at["not_eligible", "reason"] == G.NOT_ELIGIBLE
    assert (out.loc[~out["gate_pass"], "status"] == G.FAIL).all() and (out.loc[out["gate_pass"], "reason"] == "").all()
    counts = G.reason_counts(out.reset_index()).set_index("requirement")["states"]
    assert counts["not rank-eligible in the fit"] == 1 and counts["precision: 90% interval > 15.6"] == 2


def test_without_the_lineage_map_two_families_of_one_suite_count_twice():
    obs, scores, models = frames()
    out = G.headline_gates(scores, obs, MEMBERSHIP, models, {**CFG, "lineages": {}}).set_index("model")
    assert out.at["one_lineage", "n_lineages"] == 2
    # still no route: two families are fewer than any route asks
    assert not out.at["one_lineage", "gate_pass"] and "lineage" not in out.at["one_lineage", "reason"]


def test_published_scores_say_not_enough_evidence_and_keep_the_numbers():
    obs, scores, models = frames()
    out = G.headline_gates(scores, obs, MEMBERSHIP, models, CFG)
    states, heads = G.apply_to_scores(scores, models, out)
    heads = heads.set_index("model")
    assert heads.loc[["broad", "precise"], "headline_status"].eq("published").all()
    assert heads.loc[["wide_three", "one_lineage", "not_eligible"], "headline_status"].eq(G.FAIL).all()
    assert heads.at["wide_three", "headline_gate_reason"] == out.set_index("model").at["wide_three", "reason"]
    assert heads["display_mean"].tolist() == models["display_mean"].tolist()
    assert states.set_index("model")["headline_gate"].to_dict()["precise"] == G.PASS
    with pytest.raises(ValueError, match="not the same states"):
        G.apply_to_scores(scores, models, out.iloc[:-1])


def test_the_rule_is_validated_where_it_is_written(tmp_path):
    cfg = load_publish_config()["headline_gate"]
    assert cfg["min_lineages"] >= 1 and "breadth" in cfg["routes"]
    path = tmp_path / "publish.yaml"
    text = (load_publish_config.__globals__["PUBLISH_CONFIG"]).read_text()
    path.write_text(text.replace("one_of_categories: [reasoning, coding]", "one_of_categories: [reasonning]"))
    with pytest.raises(ConfigError, match=r"publish.yaml, line \d+: headline_gate.routes.breadth.one_of_categories"):
        load_publish_config(path)
