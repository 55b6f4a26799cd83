-- Cost stage: the reported costs the cost model (stan/cost.stan) fits.
-- In:  raw_costs (one row per reported cost, USD per task), registry_model_ids, registry_benchmarks,
--      and two small tables the runner writes from config/cost.yaml (atlas_assets/cost/clean.py):
--        cost_config_evaluators (pattern, evaluator, priority): '<source>/<file>' GLOB pattern -> evaluator
--        cost_config_agent_files (pattern, standard_harness, priority): files that publish per-row agent
--          systems, with the regex of the benchmark's standard harness there
-- Out: cost_observations, one row per kept raw_costs row (grain: row_key), mapped to the SAME canonical
--      model and reasoning state its score gets (registry_model_ids, as in sql/04_pooled_states.sql), with
--      its evaluator, a harness flag, log10 dollars and a run weight; audit_cost_exclusions, one row per
--      dropped raw_costs row with the rule that dropped it: rows in = rows kept + rows excluded.
-- Rules (each a CTE, applied in this order; a row is charged to the first rule that drops it):
--   unregistered_benchmark    the cost's benchmark has no registry entry
--   unknown_model_id          the published identifier is not in registry_model_ids
--   unmapped_model            registry_model_ids.model is NULL
--   unmapped_reasoning_state  registry_model_ids.reasoning_state is NULL
--   not_a_cost                usd_per_task is not a finite positive number (the parsers audit these
--                             already; a row that gets here anyway is refused, never fitted)
-- Harness flag (`harnessed`, the model's harness offset applies): the run's sampling class (consensus for
-- best_of_n / consensus, else single; the protocol defaults to the benchmark's dominant one) differs from
-- the benchmark's dominant class, or its file publishes per-row agent systems (cost_config_agent_files)
-- and its harness does not match that file's standard harness. A benchmark's own standard harness (an
-- agentic benchmark's scaffold, aider's edit loop) is no offset: its reference cost already includes it.
-- One run counted once: reports of one run are grouped and each row weighted 1 / rows of its run, so a run
-- carries weight 1 however often it is reported. Rows of one record (source, file, row, benchmark: e.g. a
-- run's total and its per-instance cost) are one run; records of the same model, state, benchmark and
-- harness flag whose dollars per task agree are one run: within `cost_same_run_relative_tolerance`, or
-- one is the other rounded to the decimals it was published with (Epoch's 0.46 of the board's 0.459958).
-- Records are linked in order of cost, so a chain of agreeing reports is one run.
-- Variables: cost_same_run_relative_tolerance.

CREATE OR REPLACE TEMP TABLE _cost_decisions AS
WITH
costs AS (
    SELECT c.*,
           b.benchmark IS NOT NULL AS registered, b.family AS suite, b.category, b.sampling_protocol AS dominant_protocol,
           m.model_id IS NOT NULL AS known_id, m.model, m.reasoning_state,
           c.source || '/' || c.file AS source_file,
           NULL::VARCHAR AS reason
    FROM raw_costs AS c
    LEFT JOIN registry_benchmarks AS b USING (benchmark)
    LEFT JOIN registry_model_ids AS m USING (model_id)
),
-- each rule CTE passes every row on and names itself as the reason of the rows it is the
-- first to drop (rows an earlier rule dropped keep that rule's reason)
unregistered_benchmark AS (
    SELECT * REPLACE (coalesce(reason, CASE WHEN NOT registered THEN 'unregistered_benchmark' END) AS reason)
    FROM costs
),
unknown_model_id AS (
    SELECT * REPLACE (coalesce(reason, CASE WHEN NOT known_id THEN 'unknown_model_id' END) AS reason)
    FROM unregistered_benchmark
),
unmapped_model AS (
    SELECT * REPLACE (coalesce(reason, CASE WHEN known_id AND model IS NULL THEN 'unmapped_model' END) AS reason)
    FROM unknown_model_id
),
unmapped_reasoning_state AS (
    SELECT * REPLACE (coalesce(reason,
        CASE WHEN known_id AND reasoning_state IS NULL THEN 'unmapped_reasoning_state' END) AS reason)
    FROM unmapped_model
),
not_a_cost AS (
    SELECT * REPLACE (coalesce(reason,
        CASE WHEN usd_per_task IS NULL OR NOT isfinite(usd_per_task) OR usd_per_task <= 0 THEN 'not_a_cost' END) AS reason)
    FROM unmapped_reasoning_state
)
SELECT * FROM not_a_cost;

CREATE OR REPLACE TEMP TABLE _cost_kept AS
WITH
kept AS (SELECT * FROM _cost_decisions WHERE reason IS NULL),
evaluator AS (
    -- the first configured pattern that matches the row's '<source>/<file>', else '<source>/<file>' itself
    SELECT k.row_key, coalesce(arg_min(e.evaluator, e.priority), k.source_file) AS evaluator
    FROM kept AS k
    LEFT JOIN cost_config_evaluators AS e ON k.source_file GLOB e.pattern
    GROUP BY k.row_key, k.source_file
),
agent_file AS (
    SELECT k.row_key, arg_min(a.standard_harness, a.priority) AS standard_harness, count(a.pattern) > 0 AS agent_file
    FROM kept AS k
    LEFT JOIN cost_config_agent_files AS a ON k.source_file GLOB a.pattern
    GROUP BY k.row_key
),
flagged AS (
    SELECT k.*, e.evaluator, a.standard_harness,
           coalesce(k.sampling_protocol, k.dominant_protocol) AS effective_protocol,
           CASE WHEN coalesce(k.sampling_protocol, k.dominant_protocol) IN ('consensus', 'best_of_n')
                THEN 'consensus' ELSE 'single' END AS sampling_class,
           CASE WHEN k.dominant_protocol IN ('consensus', 'best_of_n') THEN 'consensus' ELSE 'single' END AS dominant_class,
           a.agent_file AND NOT regexp_matches(coalesce(k.harness, ''), a.standard_harness) AS nonstandard_harness
    FROM kept AS k
    JOIN evaluator AS e USING (row_key)
    JOIN agent_file AS a USING (row_key)
)
SELECT *,
       sampling_class <> dominant_class OR nonstandard_harness AS harnessed,
       CASE WHEN sampling_class <> dominant_class THEN 'protocol_' || effective_protocol
            WHEN nonstandard_harness THEN 'agent_system' END AS harness_reason,
       log10(usd_per_task) AS log10_usd,
       -- decimals the figure was published with (a per-task figure; a converted whole-run one is not rounded)
       CASE WHEN cost_unit = 'usd_per_task'
            THEN list_min([d FOR d IN range(0, 13) IF abs(round(reported_value, d::INTEGER) - reported_value) <= 1e-12 * reported_value]) END AS published_decimals
FROM flagged;

CREATE OR REPLACE TABLE cost_observations AS
WITH
records AS (
    -- one record per (source, file, row, benchmark): its cost columns report one run
    SELECT source, file, row_number, benchmark, model, reasoning_state, harnessed,
           median(usd_per_task) AS usd, min(published_decimals) AS decimals
    FROM _cost_kept
    GROUP BY ALL
),
ordered AS (
    SELECT *,
           lag(usd) OVER w AS prev_usd, lag(decimals) OVER w AS prev_decimals
    FROM records
    WINDOW w AS (PARTITION BY model, reasoning_state, benchmark, harnessed ORDER BY usd, source, file, row_number)
),
linked AS (
    -- a record joins the run of the record just below it in cost when the two agree
    SELECT *,
           prev_usd IS NOT NULL AND (
               usd - prev_usd <= getvariable('cost_same_run_relative_tolerance') * usd
               OR (decimals IS NOT NULL AND abs(round(prev_usd, decimals::INTEGER) - usd) <= 1e-9 * usd)
               OR (prev_decimals IS NOT NULL AND abs(round(usd, prev_decimals::INTEGER) - prev_usd) <= 1e-9 * prev_usd)
           ) AS same_as_previous
    FROM ordered
),
runs AS (
    SELECT *,
           sum(CASE WHEN same_as_previous THEN 0 ELSE 1 END) OVER (
               PARTITION BY model, reasoning_state, benchmark, harnessed
               ORDER BY usd, source, file, row_number ROWS UNBOUNDED PRECEDING) AS run_index
    FROM linked
),
keyed AS (
    SELECT k.*,
           r.model || '|' || r.reasoning_state || '|' || r.benchmark || '|' || CASE WHEN r.harnessed THEN 'h' ELSE 's' END
               || '#' || r.run_index AS run_id
    FROM _cost_kept AS k
    JOIN runs AS r USING (source, file, row_number, benchmark)
)
SELECT row_key, source, source_class, file, row_number, model_id, model, reasoning_state, benchmark, suite, category,
       evaluator, harnessed, harness_reason, harness, effective_protocol, cost_column, cost_unit, reported_value,
       tasks, usd_per_task, log10_usd, evaluated_on, run_id,
       count(*) OVER (PARTITION BY run_id)::INTEGER AS run_rows,
       1.0 / count(*) OVER (PARTITION BY run_id) AS weight
FROM keyed
ORDER BY model, reasoning_state, benchmark, row_key;

CREATE OR REPLACE TABLE audit_cost_exclusions AS
SELECT 'cost_observations' AS stage, reason, row_key AS subject, [row_key] AS row_keys, benchmark, model_id, model,
       usd_per_task AS value,
       to_json({source: source, file: file, row_number: row_number, cost_column: cost_column,
                reasoning_state: reasoning_state, registered_benchmark: registered, known_model_id: known_id}) AS "values"
FROM _cost_decisions
WHERE reason IS NOT NULL
ORDER BY reason, row_key;

DROP TABLE _cost_kept;
DROP TABLE _cost_decisions;
