-- Stage 1 of the cleaning chain: orientation.
-- In:  raw_scores (one row per published score), registry_benchmarks.
-- Out: oriented_scores, one row per kept raw row (grain: row_key), with `score`
--      oriented so that higher is better, still in the benchmark's declared units.
-- Rules (each a CTE, applied in this order; a row is charged to the first rule that drops it):
--   unregistered_benchmark  the benchmark has no registry entry
--   direction_not_declared  direction is not 'higher' or 'lower' (zero_best, target,
--                           custom, NULL = unknown): excluded, never folded or inferred
--   composite_index         composite indexes re-count their inputs' evidence
--   lower_without_range     a lower-is-better score cannot be reflected without a range
-- Reflection: lower-is-better s becomes range_min + range_max - s (same units, same span).

CREATE OR REPLACE TEMP TABLE _oriented_decisions AS
WITH
scores AS (
    SELECT r.row_key, r.source, r.source_class, r.model_id, r.harness, r.benchmark,
           r.score, r.stderr, r.shots, r.sampling_protocol, r.evaluated_on, r.file, r.verification_class,
           b.benchmark IS NOT NULL AS registered, b.direction, b.range_min, b.range_max, b.is_composite,
           NULL::VARCHAR AS reason
    FROM raw_scores AS r
    LEFT JOIN registry_benchmarks AS b USING (benchmark)
),
-- each rule CTE passes every row on and names itself as the reason of the rows it is the
-- first to drop (rows an earlier rule dropped keep that rule's reason)
unregistered_benchmark AS (
    SELECT * REPLACE (coalesce(reason, CASE WHEN NOT registered THEN 'unregistered_benchmark' END) AS reason)
    FROM scores
),
direction_not_declared AS (
    SELECT * REPLACE (coalesce(reason,
        CASE WHEN direction IS NULL OR direction NOT IN ('higher', 'lower')
             THEN 'direction_' || coalesce(direction, 'unknown') END) AS reason)
    FROM unregistered_benchmark
),
composite_index AS (
    SELECT * REPLACE (coalesce(reason, CASE WHEN is_composite THEN 'composite_index' END) AS reason)
    FROM direction_not_declared
),
lower_without_range AS (
    SELECT * REPLACE (coalesce(reason,
        CASE WHEN direction = 'lower' AND (range_min IS NULL OR range_max IS NULL) THEN 'lower_without_range' END) AS reason)
    FROM composite_index
)
SELECT * FROM lower_without_range;

CREATE OR REPLACE TABLE oriented_scores AS
SELECT row_key, source, source_class, model_id, harness, benchmark,
       CASE direction WHEN 'lower' THEN range_min + range_max - score ELSE score END AS score,
       score AS score_published,
       direction, stderr, shots, sampling_protocol, evaluated_on, file, verification_class
FROM _oriented_decisions
WHERE reason IS NULL;

DELETE FROM audit_exclusions WHERE stage = 'oriented_scores';
INSERT INTO audit_exclusions
SELECT 'oriented_scores', reason, row_key, [row_key], benchmark, NULL, model_id, NULL, score,
       to_json({direction: direction, is_composite: is_composite, range_min: range_min, range_max: range_max})
FROM _oriented_decisions
WHERE reason IS NOT NULL;

DROP TABLE _oriented_decisions;
