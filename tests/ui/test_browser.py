"""The Dagster UI as a user sees it, in a real browser (Debian's Chromium driven by Playwright), and the same
server's GraphQL API.

One `dagster dev` for the session (the `ui_server` fixture, tests/conftest.py: webserver + daemon, 127.0.0.1,
free port, temporary DAGSTER_HOME and ATLAS_HOME, sources from the offline mirror) serves the project's location
and the test location `broken_input` (tests/ui/broken_location.py) for every test here. The tests share its
instance and run in file order: the UI's first materialization of a source comes before the API's run of the
ingest and registry assets. Screenshots land in test-artifacts/ui/ (gitignored).
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
from pathlib import Path
from urllib.parse import urlparse

import duckdb
import pytest

from tests.conftest import MIRROR, PROJECT_ROOT
from tests.ui.server import SMALL_FIT_RUN_CONFIG

pytestmark = pytest.mark.slow

CHROMIUM = Path("/usr/bin/chromium")
# Headless Chromium as root in a container (DESIGN.md, "Facts checked on this machine").
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-dev-shm-usage"]
ARTIFACTS = PROJECT_ROOT / "test-artifacts" / "ui"
LOCATION = "atlas_assets"
# Names of the nodes the lineage graph draws for a group's own assets (upstream assets of other groups are
# drawn smaller, without this class). A long name is shortened in the middle with an ellipsis.
GRAPH_NODE_NAME = '[class*="AssetNode_assetName"]'
RUN_TIMEOUT_MS = 180_000
# a fit may first build stan/atlas.stan: minutes for a cold PyStan build on a loaded machine (CmdStan's is cached)
FIT_TIMEOUT_MS = 600_000  # within the per-test timeout (pyproject: 900 s)
INGEST_AND_REGISTRY = ["registry_benchmarks", "epoch_hub_scores", "swe_bench_scores", "raw_scores", "registry_model_ids"]
# The sampler's per-chain progress line in a fit's log (atlas_assets/model/engines.py, both engines)
PROGRESS_LINE = re.compile(r"^chain (\d+): iteration (\d+)/(\d+) \((warmup|sampling)\)$")

playwright_api = pytest.importorskip("playwright.sync_api", reason="the playwright package is a dev dependency: uv sync")
expect = playwright_api.expect


@pytest.fixture(scope="module")
def server(ui_server):
    return ui_server


COMMUNITY_DIALOG = "Join the Dagster community"


def skip_community_dialog(page) -> None:
    # dispatched, not clicked: while the dialog fades in, its backdrop takes the pointer
    page.get_by_role("button", name="Skip").dispatch_event("click")
    expect(page.get_by_text(COMMUNITY_DIALOG)).to_have_count(0)


@pytest.fixture(scope="module")
def browser(server):
    if not CHROMIUM.exists():
        why = f"{CHROMIUM} not found: `make setup` installs Debian's chromium with apt-get (as root)"
        if os.environ.get("CI"):
            pytest.fail(why)
        pytest.skip(why)
    shutil.rmtree(ARTIFACTS, ignore_errors=True)
    ARTIFACTS.mkdir(parents=True)
    with playwright_api.sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS)
        # Dagster's sign-up dialog opens once per instance over the first page shown: skip it before the tests.
        first = chromium.new_page(base_url=server.url)
        first.goto("/overview")
        try:
            first.get_by_text(COMMUNITY_DIALOG).wait_for(timeout=10_000)
            skip_community_dialog(first)
        except playwright_api.TimeoutError:
            pass
        first.close()
        yield chromium
        chromium.close()


@pytest.fixture
def page(browser, server):
    context = browser.new_context(base_url=server.url, viewport={"width": 1600, "height": 1000})
    context.set_default_timeout(30_000)
    page = context.new_page()
    page.add_locator_handler(page.get_by_text(COMMUNITY_DIALOG), lambda: skip_community_dialog(page))  # should it return
    yield page
    context.close()


def shot(page, name: str) -> None:
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)


def matches_label(name: str, label: str) -> bool:
    """A graph label is the name, or its start and end around an ellipsis ("fami…_observations")."""
    if "…" not in label:
        return label == name
    head, tail = label.split("…", 1)
    return len(name) > len(label) - 1 and name.startswith(head) and name.endswith(tail)


def group_assets() -> dict[str, set[str]]:
    """Each stage group's assets, from the project's definitions (not from the server under test)."""
    from atlas_assets.definitions import STAGES, defs

    graph = defs.resolve_asset_graph()
    groups: dict[str, set[str]] = {group: set() for group in STAGES}
    for key in graph.get_all_asset_keys():
        groups.setdefault(graph.get(key).group_name, set()).add(key.to_user_string())
    return groups


def launch_and_open_run(page, button: str, *, confirm: bool = False) -> str:
    """Click a materialize button, follow the 'Launched run' toast to the run page; return the run id."""
    page.locator("button", has_text=re.compile(rf"^{button}$")).first.click()
    if confirm:  # "Materializing these assets may fail because the upstream assets ... have not been materialized"
        page.get_by_role("button", name="Confirm").click()
    toast = page.locator("[data-sonner-toast]", has_text="Launched run")
    toast.get_by_text("View", exact=True).click()
    page.wait_for_url(re.compile(r"/runs/[0-9a-f-]{36}"))
    return page.url.rsplit("/", 1)[-1]


def test_each_stage_group_lineage_page_lists_its_assets(page):
    groups = group_assets()
    assert {"registry", "ingest", "clean", "model", "outputs", "validation", "publish"} <= set(groups)
    # the graph draws only the nodes in view (the outputs group has 12): a large window shows a whole group
    page.set_viewport_size({"width": 3840, "height": 2400})
    for group, expected in groups.items():
        assert expected, f"group {group} has no assets"
        page.goto(f"/locations/{LOCATION}/asset-groups/{group}")
        nodes = page.locator(GRAPH_NODE_NAME)
        expect(nodes).to_have_count(len(expected), timeout=60_000)
        labels = nodes.all_inner_texts()
        unmatched_names = [n for n in expected if not any(matches_label(n, label) for label in labels)]
        unmatched_labels = [label for label in labels if not any(matches_label(n, label) for n in expected)]
        assert not unmatched_names and not unmatched_labels, (group, unmatched_names, unmatched_labels)
        shot(page, f"lineage_{group}")
        # The List tab beside the graph names every asset in full.
        page.goto(f"/locations/{LOCATION}/asset-groups/{group}/list")
        links = page.locator("a[href^='/assets/']").filter(has_text=re.compile(r"^[a-z_0-9]+$"))
        expect(links.first).to_be_visible(timeout=60_000)
        expect(links).to_have_count(len(expected))
        hrefs = links.evaluate_all("links => links.map(link => link.getAttribute('href'))")
        assert {urlparse(href).path.removeprefix("/assets/") for href in hrefs} == expected, group
        assert {text.split("\n")[0] for text in links.all_inner_texts()} == expected, group


def test_materializing_a_source_from_the_ui_runs_it_and_shows_its_metadata(page, server):
    from atlas_assets.ingest import swebench

    page.goto("/assets/swe_bench_scores")
    # registry_benchmarks upstream was never materialized here, so the UI asks first.
    run_id = launch_and_open_run(page, "Materialize", confirm=True)
    expect(page.get_by_text("Success", exact=True).first).to_be_visible(timeout=RUN_TIMEOUT_MS)
    shot(page, "materialize_run")
    status = server.graphql('query($id: ID!) { runOrError(runId: $id) { ... on Run { status } } }', {"id": run_id})
    assert status["runOrError"]["status"] == "SUCCESS"

    url = urlparse(swebench.URL)
    mirrored = MIRROR / url.netloc / url.path.lstrip("/")
    sha256 = hashlib.sha256(mirrored.read_bytes()).hexdigest()
    with duckdb.connect(str(Path(server.env["ATLAS_HOME"]) / "atlas.duckdb"), read_only=True) as conn:
        staged = conn.execute("SELECT count(*) FROM raw_scores__swe_bench").fetchone()[0]
    assert staged > 100

    page.goto("/assets/swe_bench_scores")
    metadata = page.locator("table", has_text="snapshot_sha256")
    expect(metadata).to_be_visible()
    for key, value in (("snapshot_sha256", sha256), ("score_rows", str(staged)), ("status", "parsed"),
                       ("origin", "mirror"), ("fresh", "true")):
        row = metadata.locator("tr", has=page.get_by_text(key, exact=True))
        expect(row).to_contain_text(value)
    expect(page.get_by_text("Never materialized")).to_have_count(0)
    shot(page, "materialized_swe_bench_scores")

    # its checks, freshness included, all evaluated on that materialization and passed
    page.goto("/assets/swe_bench_scores?view=checks")
    expect(page.get_by_text(re.compile(r"^Checks \(5\)$"))).to_be_visible()
    for check in ("fresh_download_parsed", "scrape_succeeded", "snapshot_not_stale", "snapshot_recorded", "every_file_read"):
        expect(page.get_by_text(check, exact=True).first).to_be_visible()
    expect(page.get_by_text("Succeeded", exact=True)).to_have_count(5)  # each check's latest result, in the list
    shot(page, "checks_swe_bench_scores")


def test_ui_lists_assets_grouped_by_stage(server):
    nodes = server.graphql("{ assetNodes { assetKey { path } groupName hasAssetChecks } }")["assetNodes"]
    groups = {node["assetKey"]["path"][-1]: node["groupName"] for node in nodes if len(node["assetKey"]["path"]) == 1}
    assert {groups[name] for name in ("registry_benchmarks", "registry_model_ids")} == {"registry"}
    assert {groups[name] for name in ("epoch_hub_scores", "swe_bench_scores", "raw_scores")} == {"ingest"}
    assert {"clean", "model"} <= set(groups.values())


def test_ui_materializes_ingest_and_registry_and_shows_checks(server):
    run_id = server.launch_assets(INGEST_AND_REGISTRY)
    assert server.wait_for_run(run_id) == "SUCCESS", server.log_tail()
    data = server.graphql(
        """{ assetNodes(assetKeys: [{path: ["raw_scores"]}]) {
               assetMaterializations(limit: 1) { runId metadataEntries { label ... on IntMetadataEntry { intValue } } }
               assetChecksOrError { ... on AssetChecks { checks { name executionForLatestMaterialization { status } } } }
           } }"""
    )["assetNodes"][0]
    materialization = data["assetMaterializations"][0]
    assert materialization["runId"] == run_id
    rows = {entry["label"]: entry.get("intValue") for entry in materialization["metadataEntries"]}
    assert rows["dagster/row_count"] > 3000
    statuses = {check["name"]: (check["executionForLatestMaterialization"] or {}).get("status") for check in data["assetChecksOrError"]["checks"]}
    assert statuses["raw_scores_expectations"] == "SUCCEEDED"
    assert statuses["raw_scores_benchmarks_registered"] == "SUCCEEDED"


def test_a_failing_blocking_check_shows_failed_and_its_downstream_asset_does_not_run(page, server):
    page.goto("/locations/broken_input/asset-groups/broken_input")
    expect(page.locator(GRAPH_NODE_NAME)).to_have_count(2, timeout=60_000)
    run_id = launch_and_open_run(page, "Materialize all")
    expect(page.get_by_text("Failure", exact=True).first).to_be_visible(timeout=RUN_TIMEOUT_MS)
    expect(page.get_by_text("Not executed (1)")).to_be_visible()
    expect(page.get_by_text("Dependencies for step epoch_hub_scores failed").first).to_be_visible()
    shot(page, "failed_check_run")

    page.goto("/assets/broken_input/registry_benchmarks?view=checks")
    expect(page.get_by_text("This is a blocking asset check.")).to_be_visible()
    expect(page.get_by_text("Failed", exact=True).first).to_be_visible()
    # the check's own finding, as GX reported it: the broken floor and its value
    expect(page.get_by_text(re.compile(r"column='floor'.*1 unexpected, e\.g\. \[1\.5\]"))).to_be_visible()
    shot(page, "failed_check")

    # downstream: planned in that run, never executed; the UI says so and shows no scrape of it
    page.goto("/assets/broken_input/epoch_hub_scores")
    expect(page.get_by_text(re.compile(rf"Failed in\s*{run_id[:8]}")).first).to_be_visible()
    expect(page.get_by_text("source_url", exact=True)).to_be_visible()  # definition metadata only
    expect(page.get_by_text("snapshot_sha256", exact=True)).to_have_count(0)
    shot(page, "downstream_not_run")
    # and the instance agrees: the run failed, the downstream asset has no materialization
    data = server.graphql(
        """query($id: ID!) { runOrError(runId: $id) { ... on Run { status } }
             assetNodes(assetKeys: [{path: ["broken_input", "epoch_hub_scores"]}]) { assetMaterializations(limit: 1) { runId } } }""",
        {"id": run_id},
    )
    assert data["runOrError"]["status"] == "FAILURE"
    assert data["assetNodes"][0]["assetMaterializations"] == []


def test_the_nightly_schedule_is_listed_and_running(page):
    page.goto("/automation")
    row = page.locator("[data-index]", has=page.locator(f"a[href='/locations/{LOCATION}/schedules/nightly_refresh']"))
    expect(row).to_contain_text("At 03:00 AM UTC")
    toggle = row.locator("input[type=checkbox]").last
    expect(toggle).to_be_enabled(timeout=30_000)  # disabled while the schedule state loads
    expect(toggle).to_be_checked()
    shot(page, "automation")
    page.goto(f"/locations/{LOCATION}/schedules/nightly_refresh")
    expect(page.get_by_text("Running", exact=True).first).to_be_visible()
    expect(page.get_by_text(re.compile(r"3:00:00 AM UTC")).first).to_be_visible()  # the next tick
    expect(page.get_by_text("atlas_job").first).to_be_visible()
    shot(page, "schedule_nightly_refresh")


def run_messages(server, run_id: str) -> list[tuple[str, float]]:
    """(message, timestamp in s) of each log message of a run's capability_fit step, in event order."""
    events, cursor = [], None
    while True:
        page = server.graphql(
            """query($id: ID!, $cursor: String) { logsForRun(runId: $id, afterCursor: $cursor) {
                 ... on EventConnection { cursor hasMore events { __typename
                   ... on MessageEvent { message timestamp stepKey } } } } }""",
            {"id": run_id, "cursor": cursor},
        )["logsForRun"]
        events += page["events"]
        cursor = page["cursor"]
        if not page["hasMore"]:
            break
    return [(e["message"], int(e["timestamp"]) / 1000) for e in events
            if e["__typename"] == "LogMessageEvent" and e.get("stepKey") == "capability_fit"]


def test_a_fit_runs_log_shows_the_samplers_progress_per_chain(page, server):
    # the real capability fit, on the small simulated panel the session's instance holds (tests/ui/server.py)
    run_id = server.launch_assets(["stan_data", "capability_fit"], run_config=SMALL_FIT_RUN_CONFIG)
    page.goto(f"/runs/{run_id}")
    line = page.get_by_text(PROGRESS_LINE).first
    expect(line).to_be_visible(timeout=FIT_TIMEOUT_MS)
    shot(page, "fit_run_progress")
    assert server.wait_for_run(run_id) == "SUCCESS", server.log_tail()

    # the instance's log has each chain's progress as it went, in iteration order, before sampling was done
    messages = run_messages(server, run_id)
    texts = [message for message, _ in messages]
    done = max(at for message, at in messages if message.startswith("sampling done"))
    progress = [(PROGRESS_LINE.match(message), at) for message, at in messages if PROGRESS_LINE.match(message)]
    assert {int(match.group(1)) for match, _ in progress} == {1, 2}, texts
    assert all(at <= done for _, at in progress)
    cmdstan = any(text.startswith("engine: cmdstanpy") for text in texts)
    # pilot fit: 20 + 20 iterations, once or in several rounds (a round whose draws are not yet typical of the
    # posterior is followed by another, model.yaml pilot_rounds); main fit: a tuning run of 15 + 5, then 15 draws
    # without warmup (CmdStan, model.yaml cold_fixed_step), or 15 + 15 in one run (tests/ui/server.py)
    rounds = 1 + sum(text.startswith("pilot draws not typical") for text in texts)
    tuned = any(text.startswith("main fit: step size") for text in texts)
    # ... and a main fit that fails its gates (likely at 15 draws) is followed by another, 15 + 15 (model.yaml
    # refit_on_failure)
    again = sum(text.startswith("main fit failed its gates") for text in texts)
    runs = [(40, rounds, "warmup"), (30, again, "warmup"), (20, 1, "warmup"), (15, 1, "sampling")] if tuned else \
        [(40, rounds, "warmup"), (30, 1 + again, "warmup")]
    assert tuned == cmdstan, texts
    for chain, (total, fits, first_phase) in ((c, run) for c in (1, 2) for run in runs):
        lines = [(int(m.group(2)), m.group(4)) for m, _ in progress if int(m.group(1)) == chain and int(m.group(3)) == total]
        # one run of lines per fit: a fit's lines are in iteration order, the next fit starts again from 1
        segments: list[list] = []
        for i, phase in lines:
            if not segments or i < segments[-1][-1][0]:
                segments.append([])
            segments[-1].append((i, phase))
        assert (len(segments) == fits) if cmdstan else (len(segments) <= fits), (chain, total, lines)
        for segment in segments:
            if cmdstan:
                # CmdStan prints every `refresh` iterations (1 or 2 here) as it goes, not one line per chain once it
                # has ended; PyStan's progress is polled every 0.25 s, so a fit this short may show few of its lines
                assert segment[0] == (1, first_phase) and segment[-1] == (total, "sampling") and len(segment) >= 3, (chain, segment)
