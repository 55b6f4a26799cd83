-- Tables written by the ingest and registry stages (Python), read by every SQL stage.
-- This file is the contract between those stages: the loaders create exactly these columns.

-- One row per published score: one (source, file, row, score column).
CREATE TABLE IF NOT EXISTS raw_scores (
    row_key           VARCHAR PRIMARY KEY,  -- '<source>/<file>#<row_number>/<benchmark>'
    source            VARCHAR NOT NULL,     -- 'epoch_hub' | 'swe_bench' | 'aider' | 'tau2_bench' | 'arc_prize'
    source_class      VARCHAR NOT NULL,     -- 'model_release' | 'evaluator_release' | 'benchmark_release'
    snapshot_sha256   VARCHAR NOT NULL,     -- content hash of the download the row came from
    file              VARCHAR NOT NULL,     -- file inside the download ('gpqa_diamond.csv', 'leaderboards.json:Verified')
    row_number        INTEGER NOT NULL,     -- 1-based data row (CSV) or result index (JSON)
    model_id          VARCHAR NOT NULL,     -- model identifier exactly as published
    model_name        VARCHAR,              -- display name as published, when the file has one
    benchmark         VARCHAR NOT NULL,     -- registry key of the exact benchmark
    score_column      VARCHAR NOT NULL,     -- column the score came from
    score             DOUBLE NOT NULL,      -- headline score as published (native units)
    stderr            DOUBLE,               -- standard error as published (same units as score)
    ci_low            DOUBLE,               -- confidence interval as published, when given
    ci_high           DOUBLE,
    shots             INTEGER,              -- few-shot count, when published
    harness           VARCHAR,              -- agent / scaffold / edit format / environment: the configuration beyond the model
    sampling_protocol VARCHAR,              -- 'single' | 'average' | 'consensus' | 'best_of_n' | NULL when not published
    evaluated_on      DATE,
    released_on       DATE,                 -- model release date as published
    organization      VARCHAR,
    origin            VARCHAR,              -- upstream leaderboard or paper named by the source, when given
    origin_url        VARCHAR,
    verification_class VARCHAR              -- who checked it (seed 002): 'independent' | 'community' | 'vendor_reported' | 'unverified'
);

-- One row per reported cost: one (source, file, row, cost column), converted to US dollars per task by
-- the column's registered unit (registry_columns.cost_unit). (source, file, row_number) is the row
-- identity of raw_scores, so a cost joins the score it was reported with; unusable costs (0 = not
-- reported, negative, a whole-run cost without a task count) are in audit_ingest, not here.
CREATE TABLE IF NOT EXISTS raw_costs (
    row_key           VARCHAR PRIMARY KEY,  -- '<source>/<file>#<row_number>/<benchmark>/cost[:<column>]'
    source            VARCHAR NOT NULL,
    source_class      VARCHAR NOT NULL,
    snapshot_sha256   VARCHAR NOT NULL,
    file              VARCHAR NOT NULL,
    row_number        INTEGER NOT NULL,
    model_id          VARCHAR NOT NULL,     -- model identifier exactly as published (as in raw_scores)
    model_name        VARCHAR,
    benchmark         VARCHAR NOT NULL,     -- the benchmark whose run the cost is of
    cost_column       VARCHAR NOT NULL,
    cost_unit         VARCHAR NOT NULL,     -- unit the value was read in: 'usd_per_task' | 'usd_per_run'
    reported_value    DOUBLE NOT NULL,      -- as published (x the column's scale)
    tasks             DOUBLE,               -- task count a whole-run value was divided by
    usd_per_task      DOUBLE NOT NULL,      -- > 0
    harness           VARCHAR,
    sampling_protocol VARCHAR,
    evaluated_on      DATE
);

-- Every row or field the parsers could not use, with the reason.
CREATE TABLE IF NOT EXISTS audit_ingest (
    source          VARCHAR NOT NULL,
    snapshot_sha256 VARCHAR,
    file            VARCHAR,
    row_number      INTEGER,
    field           VARCHAR,
    reason          VARCHAR NOT NULL,       -- reason code, e.g. 'non_numeric_score'
    detail          VARCHAR,                -- human-readable message naming the value
    value           VARCHAR
);

-- Curated benchmark registry (atlas_assets/config/benchmarks.yaml), one row per exact benchmark.
CREATE TABLE IF NOT EXISTS registry_benchmarks (
    benchmark         VARCHAR PRIMARY KEY,  -- key, e.g. 'gpqa_diamond'
    name              VARCHAR NOT NULL,     -- display name, e.g. 'GPQA Diamond'
    direction         VARCHAR,              -- 'higher' | 'lower' | 'zero_best' | 'target' | 'custom' | NULL (unknown)
    range_min         DOUBLE,               -- declared score range, in published units
    range_max         DOUBLE,
    unit              VARCHAR NOT NULL,     -- 'fraction' | 'percent' | 'rating_0_10' | 'points' | 'elo' | 'minutes'
    floor             DOUBLE NOT NULL,      -- guessing floor on the unit scale [0,1] (0 where none)
    items             INTEGER,              -- number of items when the score is a proportion of countable items
    family            VARCHAR NOT NULL,     -- statistical family (one matrix column)
    role              VARCHAR NOT NULL,     -- 'primary' | 'component' | 'diagnostic'
    kind              VARCHAR NOT NULL,     -- 'bounded' | 'rating' | 'unbounded'
    sampling_protocol VARCHAR NOT NULL,     -- dominant protocol: 'single' | 'average' | 'consensus' | 'best_of_n'
    category          VARCHAR NOT NULL,     -- 'coding' | 'agents' | 'math' | 'science' | 'reasoning' | 'knowledge' | 'language' | 'multimodal' | 'writing' | 'games' | ...
    is_safety         BOOLEAN NOT NULL,
    is_composite      BOOLEAN NOT NULL,
    contamination     VARCHAR NOT NULL,     -- 'live' | 'private' | 'static'
    notes             VARCHAR,              -- why the values are what they are
    reference         VARCHAR               -- where the facts come from (paper / site)
);

-- How each published file is read: which columns carry the score, its stderr, shots, harness, dates.
CREATE TABLE IF NOT EXISTS registry_files (
    source             VARCHAR NOT NULL,
    file               VARCHAR NOT NULL,
    source_class       VARCHAR NOT NULL,
    sampling_protocol  VARCHAR,             -- protocol of this file's scores when the file says it (else NULL)
    model_id_column    VARCHAR,
    model_name_column  VARCHAR,
    stderr_column      VARCHAR,
    ci_low_column      VARCHAR,
    ci_high_column     VARCHAR,
    shots_column       VARCHAR,
    harness_columns    VARCHAR[],           -- joined with ' | ' into raw_scores.harness
    evaluated_on_column VARCHAR,
    released_on_column VARCHAR,
    organization_column VARCHAR,
    origin_column      VARCHAR,
    origin_url_column  VARCHAR,
    verification_class VARCHAR,             -- the file's verification class, when it is not its source class's default
    republishes_source VARCHAR,             -- the file copies another source's file (same runs): its source ...
    republishes_file   VARCHAR,             -- ... and file; a copied row and its original are reports of one cell
    PRIMARY KEY (source, file)
);

-- Every column of every registered file: a score mapped to a benchmark, an auxiliary field, or ignored with a reason.
CREATE TABLE IF NOT EXISTS registry_columns (
    source     VARCHAR NOT NULL,
    file       VARCHAR NOT NULL,
    "column"   VARCHAR NOT NULL,
    use        VARCHAR NOT NULL,            -- 'score' | 'cost' | 'auxiliary' | 'ignored'
    benchmark  VARCHAR,                     -- for use = 'score'
    headline   BOOLEAN NOT NULL,            -- the file's headline score column
    scale      DOUBLE NOT NULL,             -- published value × scale = value in the benchmark's declared units
    reason     VARCHAR,                     -- for 'ignored' (and notes for auxiliary)
    cost_unit  VARCHAR,                     -- for use = 'cost': 'usd_per_task' | 'usd_per_run'
    tasks_column VARCHAR,                   -- for 'usd_per_run': the column with the run's task count
    run_total_when VARCHAR,                 -- for 'usd_per_task': rows where this column is filled carry a whole-run total
    PRIMARY KEY (source, file, "column")
);
ALTER TABLE registry_columns ADD COLUMN IF NOT EXISTS run_total_when VARCHAR;

-- Model registry: every published identifier mapped to a canonical model and a normalized reasoning state.
CREATE TABLE IF NOT EXISTS registry_model_ids (
    model_id          VARCHAR PRIMARY KEY,  -- exactly as published
    model             VARCHAR,              -- canonical model key (NULL when unknown)
    reasoning_state   VARCHAR,              -- default | minimal | low | medium | high | xhigh | max | disabled | enabled (NULL when unknown)
    budget_tokens     INTEGER,              -- thinking-token budget named by the identifier, when any
    rule              VARCHAR NOT NULL      -- which documented rule decided (or why none could)
);

CREATE TABLE IF NOT EXISTS registry_models (
    model        VARCHAR PRIMARY KEY,
    display_name VARCHAR,
    organization VARCHAR,
    released_on  DATE,
    n_identifiers INTEGER NOT NULL
);

-- Everything the registry could not decide: unknown benchmarks, columns, identifiers, labels.
CREATE TABLE IF NOT EXISTS audit_registry (
    kind    VARCHAR NOT NULL,               -- 'unknown_benchmark' | 'unregistered_column' | 'unknown_model_id' | 'unknown_reasoning_label' | ...
    subject VARCHAR NOT NULL,               -- the identifier / file / column concerned
    source  VARCHAR,
    file    VARCHAR,
    detail  VARCHAR
);

-- Every retrieval attempt of every source and what came of it, failed ones included (a failed
-- download has no sha256). The fallback when a new download is unusable is the newest snapshot
-- that parsed; a snapshot that parses but loses most rows is kept on disk and rejected here.
CREATE TABLE IF NOT EXISTS source_snapshots (
    source        VARCHAR NOT NULL,
    url           VARCHAR NOT NULL,
    sha256        VARCHAR,                  -- NULL when nothing was downloaded
    retrieved_at  VARCHAR NOT NULL,         -- time of the attempt
    origin        VARCHAR NOT NULL,         -- 'live' | 'mirror'
    bytes         BIGINT,
    changed       BOOLEAN,                  -- content differs from the previous retrieval
    parsed_ok     BOOLEAN NOT NULL,         -- usable: parsed, and not rejected for lost rows
    score_rows    INTEGER,                  -- rows this snapshot itself yields (without rows kept from earlier ones)
    audit_rows    INTEGER,
    error         VARCHAR,
    run_id        VARCHAR,
    status        VARCHAR                   -- 'parsed' | 'parsed_with_file_errors' | 'rejected_shrunk' | 'parse_failed' | 'fetch_failed'
);
-- Multi-document sources (one snapshot per retrieval covering several documents): the documents of
-- each stored bundle. The bundle's sha256 is the snapshot_sha256 of its rows; each document is also
-- stored under its own sha256.
CREATE TABLE IF NOT EXISTS source_documents (
    snapshot_sha256 VARCHAR NOT NULL,       -- the bundle (source_snapshots.sha256)
    source          VARCHAR NOT NULL,
    document        VARCHAR NOT NULL,       -- name relative to the source's base URL ('edit_leaderboard.yml')
    url             VARCHAR NOT NULL,
    sha256          VARCHAR NOT NULL,       -- the document's own content hash
    bytes           BIGINT NOT NULL,
    PRIMARY KEY (snapshot_sha256, document)
);
-- Databases created before verification classes / republished files / multi-document sources.
ALTER TABLE raw_scores ADD COLUMN IF NOT EXISTS verification_class VARCHAR;
ALTER TABLE registry_files ADD COLUMN IF NOT EXISTS verification_class VARCHAR;
ALTER TABLE registry_files ADD COLUMN IF NOT EXISTS republishes_source VARCHAR;
ALTER TABLE registry_files ADD COLUMN IF NOT EXISTS republishes_file VARCHAR;
-- Databases created before failed attempts were recorded.
ALTER TABLE source_snapshots ADD COLUMN IF NOT EXISTS status VARCHAR;
ALTER TABLE source_snapshots ALTER COLUMN sha256 DROP NOT NULL;
ALTER TABLE source_snapshots ALTER COLUMN bytes DROP NOT NULL;
ALTER TABLE source_snapshots ALTER COLUMN changed DROP NOT NULL;
