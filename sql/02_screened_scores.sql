-- Stage 2 of the cleaning chain: protocol screen and guards.
-- In:  oriented_scores, registry_benchmarks.   Out: screened_scores (grain: row_key).
-- A score's sampling protocol, when not published (NULL), is taken to be the
-- benchmark's dominant protocol (registry_benchmarks.sampling_protocol); the result
-- is kept as `effective_protocol`. Sampling class: 'consensus' for consensus /
-- best_of_n (majority vote, best-of-N), 'single' for single / average ('average'
-- of several single attempts estimates the same single-attempt quantity).
-- Rules (each a CTE, applied in this order; a row is charged to the first rule that drops it):
--   unknown_protocol         a protocol outside single|average|consensus|best_of_n
--   protocol_class_mismatch  sampling class differs from the dominant protocol's class
--   below_half_floor         (score - min)/(max - min) < floor_guard_fraction * floor:
--                            guessing alone clears the floor -> refusal / parse failure.
--                            Not applied where the guard level is below floor_guard_min_items
--                            items (floor_guard_fraction * floor * items): on 45 items a floor
--                            of 0.001 puts half the floor at 0.02 of an item, so a 0/45 is a
--                            genuine zero, not a refusal. Continuous scores (no items): applied.
--   outside_declared_range   beyond the declared range by more than range_slack_fraction
--   bounds_suspect           the benchmark has more than bounds_guard_max_share of its
--                            remaining scores at a declared bound that a correct declaration
--                            makes rare: exactly its max, or exactly its min where it has a
--                            guessing floor (guessing alone scores above the min). Exact zeros
--                            on a floorless benchmark are real scores (the model has a zero
--                            hurdle for them) and never count. Every score of a suspect
--                            benchmark is excluded, and the benchmark is listed in audit_bounds
--                            (a WARN check names it). Computed on the rows the row-level rules
--                            keep, so the stage is idempotent.
-- Out also: audit_bounds, one row per benchmark with a score at a declared bound.
-- Variables: floor_guard_fraction, floor_guard_min_items, range_slack_fraction, bounds_guard_max_share.

CREATE OR REPLACE TEMP TABLE _screened_decisions AS
WITH
scores AS (
    SELECT o.*,
           coalesce(o.sampling_protocol, b.sampling_protocol) AS effective_protocol,
           b.sampling_protocol AS dominant_protocol,
           b.range_min, b.range_max, b.floor, b.items,
           (o.score - b.range_min) / nullif(b.range_max - b.range_min, 0) AS u_declared,
           NULL::VARCHAR AS reason
    FROM oriented_scores AS o
    JOIN registry_benchmarks AS b USING (benchmark)
),
classified AS (
    SELECT *,
           CASE WHEN effective_protocol IN ('consensus', 'best_of_n') THEN 'consensus' ELSE 'single' END AS sampling_class,
           CASE WHEN dominant_protocol IN ('consensus', 'best_of_n') THEN 'consensus' ELSE 'single' END AS dominant_class
    FROM scores
),
-- each rule CTE passes every row on and names itself as the reason of the rows it is the
-- first to drop (rows an earlier rule dropped keep that rule's reason)
unknown_protocol AS (
    SELECT * REPLACE (coalesce(reason,
        CASE WHEN effective_protocol NOT IN ('single', 'average', 'consensus', 'best_of_n') THEN 'unknown_protocol' END) AS reason)
    FROM classified
),
protocol_class_mismatch AS (
    SELECT * REPLACE (coalesce(reason,
        CASE WHEN sampling_class <> dominant_class THEN 'protocol_class_mismatch' END) AS reason)
    FROM unknown_protocol
),
below_half_floor AS (
    SELECT * REPLACE (coalesce(reason,
        CASE WHEN floor > 0 AND u_declared < getvariable('floor_guard_fraction') * floor
                  AND (items IS NULL OR getvariable('floor_guard_fraction') * floor * items >= getvariable('floor_guard_min_items'))
             THEN 'below_half_floor' END) AS reason)
    FROM protocol_class_mismatch
),
outside_declared_range AS (
    SELECT * REPLACE (coalesce(reason,
        CASE WHEN u_declared < -getvariable('range_slack_fraction') OR u_declared > 1 + getvariable('range_slack_fraction')
             THEN 'outside_declared_range' END) AS reason)
    FROM below_half_floor
),
bound_hits AS (
    -- per benchmark, on the rows the row-level rules keep: scores at exactly a declared bound;
    -- `counted` are the hits a correct declaration makes rare (max always; min with a floor)
    SELECT benchmark,
           count(*) AS n_scores,
           count(*) FILTER (WHERE score = range_min) AS at_min,
           count(*) FILTER (WHERE score = range_max) AS at_max,
           count(*) FILTER (WHERE score = range_max OR (score = range_min AND floor > 0)) AS counted
    FROM outside_declared_range
    WHERE reason IS NULL AND u_declared IS NOT NULL
    GROUP BY benchmark
),
bounds_suspect AS (
    -- the benchmark's bound counts ride along (bound_*) so audit_bounds reports them without counting again
    SELECT r.* REPLACE (coalesce(r.reason,
        CASE WHEN h.counted > getvariable('bounds_guard_max_share') * h.n_scores THEN 'bounds_suspect' END) AS reason),
           h.n_scores AS bound_n_scores, h.at_min AS bound_at_min, h.at_max AS bound_at_max,
           h.counted AS bound_counted
    FROM outside_declared_range AS r
    LEFT JOIN bound_hits AS h USING (benchmark)
)
SELECT * FROM bounds_suspect;

CREATE OR REPLACE TABLE screened_scores AS
SELECT row_key, source, source_class, model_id, harness, benchmark, score, score_published,
       direction, stderr, shots, sampling_protocol, effective_protocol, sampling_class, evaluated_on,
       file, verification_class
FROM _screened_decisions
WHERE reason IS NULL;

CREATE OR REPLACE TABLE audit_bounds AS
WITH hits AS (
    SELECT DISTINCT benchmark, bound_n_scores AS n_scores, bound_at_min AS at_min, bound_at_max AS at_max,
           bound_counted AS counted, floor, range_min, range_max
    FROM _screened_decisions
    WHERE bound_n_scores IS NOT NULL
)
SELECT benchmark, n_scores::INTEGER AS n_scores, at_min::INTEGER AS at_min, at_max::INTEGER AS at_max,
       counted::INTEGER AS counted, counted / n_scores AS share,
       counted > getvariable('bounds_guard_max_share') * n_scores AS suspect,
       floor, range_min, range_max
FROM hits
WHERE at_min + at_max > 0
ORDER BY suspect DESC, share DESC, benchmark;

DELETE FROM audit_exclusions WHERE stage = 'screened_scores';
INSERT INTO audit_exclusions
SELECT 'screened_scores', reason, row_key, [row_key], benchmark, NULL, model_id, NULL, score,
       to_json({effective_protocol: effective_protocol, dominant_protocol: dominant_protocol,
                u_declared: u_declared, floor: floor, items: items, range_min: range_min, range_max: range_max})
FROM _screened_decisions
WHERE reason IS NOT NULL;

DROP TABLE _screened_decisions;
