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
--                            guessing alone clears the floor -> refusal / parse failure
--   outside_declared_range   beyond the declared range by more than range_slack_fraction
--   bounds_suspect           the benchmark has more than bounds_guard_max_share of its
--                            remaining scores at exactly its min or max: the declared
--                            bounds are wrong; every score of it is excluded. Computed on
--                            the rows the row-level rules keep, so the stage is idempotent.
-- Variables: floor_guard_fraction, range_slack_fraction, bounds_guard_max_share.

CREATE OR REPLACE TEMP TABLE _screened_decisions AS
WITH
scores AS (
    SELECT o.*,
           coalesce(o.sampling_protocol, b.sampling_protocol) AS effective_protocol,
           b.sampling_protocol AS dominant_protocol,
           b.range_min, b.range_max, b.floor,
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
        CASE WHEN floor > 0 AND u_declared < getvariable('floor_guard_fraction') * floor THEN 'below_half_floor' END) AS reason)
    FROM protocol_class_mismatch
),
outside_declared_range AS (
    SELECT * REPLACE (coalesce(reason,
        CASE WHEN u_declared < -getvariable('range_slack_fraction') OR u_declared > 1 + getvariable('range_slack_fraction')
             THEN 'outside_declared_range' END) AS reason)
    FROM below_half_floor
),
bounds_suspect AS (
    SELECT r.* REPLACE (coalesce(r.reason, CASE WHEN s.benchmark IS NOT NULL THEN 'bounds_suspect' END) AS reason)
    FROM outside_declared_range AS r
    LEFT JOIN (
        SELECT benchmark
        FROM outside_declared_range
        WHERE reason IS NULL AND u_declared IS NOT NULL
        GROUP BY benchmark
        HAVING avg(CASE WHEN score = range_min OR score = range_max THEN 1.0 ELSE 0.0 END)
               > getvariable('bounds_guard_max_share')
    ) AS s USING (benchmark)
)
SELECT * FROM bounds_suspect;

CREATE OR REPLACE TABLE screened_scores AS
SELECT row_key, source, source_class, model_id, harness, benchmark, score, score_published,
       direction, stderr, shots, sampling_protocol, effective_protocol, sampling_class, evaluated_on
FROM _screened_decisions
WHERE reason IS NULL;

DELETE FROM audit_exclusions WHERE stage = 'screened_scores';
INSERT INTO audit_exclusions
SELECT 'screened_scores', reason, row_key, [row_key], benchmark, NULL, model_id, NULL, score,
       to_json({effective_protocol: effective_protocol, dominant_protocol: dominant_protocol,
                u_declared: u_declared, floor: floor, range_min: range_min, range_max: range_max})
FROM _screened_decisions
WHERE reason IS NOT NULL;

DROP TABLE _screened_decisions;
