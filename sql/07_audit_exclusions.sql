-- Stage 7 of the cleaning chain: the one exclusion ledger.
-- Created before stage 1 runs (the runner executes this file first); every stage
-- deletes its own previous rows and inserts one row per input row it drops, so
--   rows into a stage = rows it keeps (counted in its input's units) + rows it excludes
-- holds for every stage (the conservation checks compute exactly that).

CREATE TABLE IF NOT EXISTS audit_exclusions (
    stage      VARCHAR NOT NULL,   -- output table of the stage that dropped the row, e.g. 'screened_scores'
    reason     VARCHAR NOT NULL,   -- reason code, e.g. 'below_half_floor' (docs/cleaning.md lists them)
    subject    VARCHAR NOT NULL,   -- key of the dropped row at the stage's input grain
    row_keys   VARCHAR[] NOT NULL, -- raw_scores.row_key of every published score behind the dropped row
    benchmark  VARCHAR,            -- exact benchmark (stages 1-5) or NULL
    family     VARCHAR,            -- family (stages 5-6) or NULL
    model_id   VARCHAR,            -- published identifier (stages 1-4) or NULL
    model      VARCHAR,            -- canonical model (stages 4-6) or NULL
    score      DOUBLE,             -- the dropped value in the stage's units (published / oriented / u)
    "values"   JSON                -- everything else the rule looked at
);

-- Per-stage, per-reason counts: what the UI shows as asset metadata.
CREATE OR REPLACE VIEW audit_exclusion_counts AS
SELECT stage, reason, count(*) AS n_rows, sum(len(row_keys)) AS n_source_rows
FROM audit_exclusions
GROUP BY ALL;

-- Every configuration x benchmark cell whose reports could not be reconciled (stage 3).
CREATE TABLE IF NOT EXISTS audit_conflicts (
    model_id          VARCHAR NOT NULL,
    harness           VARCHAR,
    config_id         VARCHAR NOT NULL,
    benchmark         VARCHAR NOT NULL,
    row_key           VARCHAR NOT NULL,
    source            VARCHAR,
    source_class      VARCHAR,
    score             DOUBLE,
    stderr            DOUBLE,
    shots             INTEGER,
    sampling_protocol VARCHAR,
    set_aside_by      VARCHAR,     -- the tiebreak / majority step that had set this report aside, if any
    n_reports         INTEGER NOT NULL,
    cell_spread       DOUBLE NOT NULL
);

-- Scores at exactly a declared bound, per benchmark with any (stage 2). `counted` are the hits a
-- correct declaration makes rare (at the max; at the min only with a guessing floor); a benchmark
-- with share = counted / n_scores above bounds_guard_max_share is `suspect`: excluded, and named
-- by the WARN check audit_bounds_suspect_benchmarks.
CREATE TABLE IF NOT EXISTS audit_bounds (
    benchmark  VARCHAR NOT NULL,
    n_scores   INTEGER NOT NULL,   -- scores the row-level rules kept
    at_min     INTEGER NOT NULL,
    at_max     INTEGER NOT NULL,
    counted    INTEGER NOT NULL,
    share      DOUBLE NOT NULL,
    suspect    BOOLEAN NOT NULL,
    floor      DOUBLE,
    range_min  DOUBLE,
    range_max  DOUBLE
);

-- One row per (model, reasoning state, benchmark) pooled from several configurations (stage 4).
CREATE TABLE IF NOT EXISTS audit_harness_spread (
    model            VARCHAR NOT NULL,
    reasoning_state  VARCHAR NOT NULL,
    benchmark        VARCHAR NOT NULL,
    n_configs        INTEGER NOT NULL,
    config_ids       VARCHAR[] NOT NULL,
    model_ids        VARCHAR[] NOT NULL,
    harnesses        VARCHAR[] NOT NULL,
    scores           DOUBLE[] NOT NULL,
    pooled_score     DOUBLE NOT NULL,
    spread           DOUBLE NOT NULL,   -- max - min of the configurations' scores (oriented units)
    spread_unit      DOUBLE             -- the same on the declared range (NULL when none is declared)
);

-- Rounds of the stage-6 coverage filter.
CREATE TABLE IF NOT EXISTS audit_coverage_iterations (
    iteration      INTEGER NOT NULL,
    rows_in        BIGINT NOT NULL,
    rows_removed   BIGINT NOT NULL,
    families_in    BIGINT NOT NULL,
    models_in      BIGINT NOT NULL,
    removed_family_too_few_models BIGINT NOT NULL,
    removed_family_no_variance    BIGINT NOT NULL,
    removed_model_too_few_families BIGINT NOT NULL
);

-- Per-stage counts of every materialization, appended by the clean assets: the drift
-- checks compare the newest entry with the one before it.
CREATE TABLE IF NOT EXISTS audit_stage_history (
    recorded_at    TIMESTAMP NOT NULL,
    run_id         VARCHAR,
    stage          VARCHAR NOT NULL,
    rows_in        BIGINT NOT NULL,
    rows_out       BIGINT NOT NULL,
    rows_kept      BIGINT NOT NULL,
    rows_excluded  BIGINT NOT NULL,
    config_fingerprint VARCHAR,
    details        JSON
);
