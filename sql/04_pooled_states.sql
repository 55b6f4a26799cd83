-- Stage 4 of the cleaning chain: harness pooling.
-- In:  resolved_cells, registry_model_ids, registry_benchmarks, audit_conflicts.
-- Out: pooled_states, one row per (model, reasoning_state, benchmark): the median of the
--      configurations (published model_id x harness: agents, scaffolds, provider routes)
--      that report it, one vote whatever their number; plus audit_harness_spread with the
--      contributing configurations, harnesses, n and spread of every pooled group.
-- Rules (each a CTE, applied in this order; a row is charged to the first rule that drops it):
--   unknown_model_id          the published identifier is not in registry_model_ids
--   unmapped_model            registry_model_ids.model is NULL
--   conflict_blocks_state     (when conflict_blocks_state) another configuration of the same
--                             model, state and benchmark ended as a stage-3 conflict: a
--                             conflicted cell is not filled in from another configuration
--   other_setup               (when harness_pooling = 'most_models_setup', seed 001) the state
--                             has a configuration under a setup (harness; none is a setup too)
--                             that reports the benchmark for more models: only the state's
--                             best ranked setup is pooled (ranked per benchmark by models, ties
--                             by setup name); provider routes of that setup collapse to their median
-- A known model whose setting is not known (registry_model_ids.reasoning_state NULL: Epoch's
-- '_unknown', '-webapp') is kept in the state 'unknown', one per model (its configurations pool as
-- any state's do): a run at one of the model's settings, which one unknown. It is not fitted
-- (stage 6 audits it) and is placed downstream as a mixture over the model's settings
-- (atlas_assets/outputs/unknown_settings.py, docs/reasoning_states.md).
-- Pooling (harness_pooling): 'median_all' (default, seed 000 section 3): the median over every
-- harness configuration of the state; 'most_models_setup' (seed 001): the median over the
-- configurations of the one setup kept by other_setup.
-- Each state carries the strongest verification class of the configurations pooled into it.
-- Variables: conflict_blocks_state, harness_pooling, verification_order.

CREATE OR REPLACE TEMP TABLE _pooled_decisions AS
WITH
cells AS (
    SELECT c.*, m.model_id IS NOT NULL AS registered, m.model,
           CASE WHEN m.model IS NOT NULL THEN coalesce(m.reasoning_state, 'unknown') END AS reasoning_state,
           NULL::VARCHAR AS reason
    FROM resolved_cells AS c
    LEFT JOIN registry_model_ids AS m USING (model_id)
),
-- each rule CTE passes every row on and names itself as the reason of the rows it is the
-- first to drop (rows an earlier rule dropped keep that rule's reason)
unknown_model_id AS (
    SELECT * REPLACE (coalesce(reason, CASE WHEN NOT registered THEN 'unknown_model_id' END) AS reason)
    FROM cells
),
unmapped_model AS (
    SELECT * REPLACE (coalesce(reason, CASE WHEN model IS NULL THEN 'unmapped_model' END) AS reason)
    FROM unknown_model_id
),
conflicted_states AS (
    SELECT DISTINCT m.model, coalesce(m.reasoning_state, 'unknown') AS reasoning_state, a.benchmark
    FROM audit_conflicts AS a
    JOIN registry_model_ids AS m USING (model_id)
    WHERE getvariable('conflict_blocks_state')
),
conflict_blocks_state AS (
    SELECT c.* REPLACE (coalesce(c.reason, CASE WHEN x.model IS NOT NULL THEN 'conflict_blocks_state' END) AS reason)
    FROM unmapped_model AS c
    LEFT JOIN conflicted_states AS x
      ON x.model = c.model AND x.reasoning_state = c.reasoning_state AND x.benchmark = c.benchmark
),
setup_ranks AS (
    -- setups of each benchmark ranked by how many models they report it for (1 = most)
    SELECT benchmark, setup, n_models,
           row_number() OVER (PARTITION BY benchmark ORDER BY n_models DESC, setup) AS setup_rank
    FROM (
        SELECT benchmark, coalesce(harness, '(none)') AS setup, count(DISTINCT model) AS n_models
        FROM conflict_blocks_state WHERE reason IS NULL
        GROUP BY ALL
    )
),
with_setup AS (
    SELECT c.*, coalesce(c.harness, '(none)') AS setup, r.setup_rank, r.n_models AS setup_models,
           min(r.setup_rank) FILTER (WHERE c.reason IS NULL)
               OVER (PARTITION BY c.model, c.reasoning_state, c.benchmark) AS best_setup_rank
    FROM conflict_blocks_state AS c
    LEFT JOIN setup_ranks AS r ON r.benchmark = c.benchmark AND r.setup = coalesce(c.harness, '(none)')
),
other_setup AS (
    SELECT w.* REPLACE (coalesce(w.reason,
        CASE WHEN getvariable('harness_pooling') = 'most_models_setup' AND w.setup_rank > w.best_setup_rank
             THEN 'other_setup' END) AS reason),
           b.setup AS pooled_setup
    FROM with_setup AS w
    LEFT JOIN setup_ranks AS b ON b.benchmark = w.benchmark AND b.setup_rank = w.best_setup_rank
)
SELECT * FROM other_setup;

CREATE OR REPLACE TABLE pooled_states AS
WITH
kept AS (
    SELECT d.*, count(*) OVER (PARTITION BY d.model, d.reasoning_state, d.benchmark) AS n_configs
    FROM _pooled_decisions AS d
    WHERE d.reason IS NULL
),
-- most states are reported by one configuration: they skip the aggregation
one_configuration AS (
    SELECT model, reasoning_state, benchmark, score, stderr, 1 AS n_configs, [config_id] AS config_ids,
           [model_id] AS model_ids, [coalesce(harness, '(none)')] AS harnesses, [score] AS scores,
           0.0 AS spread, 0.0 AS spread_unit, n_reports, row_keys, verification_class
    FROM kept
    WHERE n_configs = 1
),
several_configurations AS (
    SELECT k.model, k.reasoning_state, k.benchmark,
           median(k.score) AS score,
           median(k.stderr) AS stderr,
           count(*) AS n_configs,
           list(k.config_id ORDER BY k.config_id) AS config_ids,
           list(DISTINCT k.model_id ORDER BY k.model_id) AS model_ids,
           list(coalesce(k.harness, '(none)') ORDER BY k.config_id) AS harnesses,
           list(k.score ORDER BY k.config_id) AS scores,
           max(k.score) - min(k.score) AS spread,
           (max(k.score) - min(k.score)) / nullif(any_value(b.range_max) - any_value(b.range_min), 0) AS spread_unit,
           sum(k.n_reports) AS n_reports,
           list_sort(flatten(list(k.row_keys))) AS row_keys,
           -- the strongest verification class among the configurations pooled (seed 002 order)
           arg_min(k.verification_class,
                   coalesce(list_position(getvariable('verification_order'), k.verification_class), 99)) AS verification_class
    FROM kept AS k
    JOIN registry_benchmarks AS b USING (benchmark)
    WHERE k.n_configs > 1
    GROUP BY k.model, k.reasoning_state, k.benchmark
)
SELECT model, reasoning_state, benchmark, score, stderr, n_configs::INTEGER AS n_configs, config_ids, model_ids,
       harnesses, scores, spread, spread_unit, n_reports::INTEGER AS n_reports, row_keys, verification_class
FROM (SELECT * FROM one_configuration UNION ALL BY NAME SELECT * FROM several_configurations);

CREATE OR REPLACE TABLE audit_harness_spread AS
SELECT model, reasoning_state, benchmark, n_configs, config_ids, model_ids, harnesses, scores,
       score AS pooled_score, spread, spread_unit
FROM pooled_states
WHERE n_configs >= 2
ORDER BY spread DESC, model, reasoning_state, benchmark;

DELETE FROM audit_exclusions WHERE stage = 'pooled_states';
INSERT INTO audit_exclusions
SELECT 'pooled_states', reason, config_id || ' :: ' || benchmark, row_keys, benchmark, NULL, model_id, model, score,
       to_json({config_id: config_id, harness: harness, reasoning_state: reasoning_state,
                n_reports: n_reports, resolution: resolution, setup_models: setup_models,
                pooled_setup: CASE WHEN reason = 'other_setup' THEN pooled_setup END})
FROM _pooled_decisions
WHERE reason IS NOT NULL;

DROP TABLE _pooled_decisions;
