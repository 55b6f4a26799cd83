-- Stage 3 of the cleaning chain: duplicate resolution.
-- In:  screened_scores, registry_benchmarks.
-- Out: resolved_cells, one row per configuration x benchmark cell
--      (configuration = published model_id + harness, '' read as none; grain: config_id, benchmark),
--      plus audit_conflicts (every report of every cell that stayed in conflict).
-- Republished results: a file that copies another source's file (registry_files.republishes_*: Epoch's
--   aider_polyglot_external.csv copies Aider's board, arc_agi*_external.csv ARC Prize's) and the file it
--   copies carry the same runs under different identifiers. Their rows are keyed by the canonical
--   configuration instead (registry model @ reasoning state, its thinking budget when the identifier
--   names one (16K and 32K are both 'high' but different runs), + harness) when the registry maps the
--   identifier, so a copy and its original are two reports of ONE cell (consensus, tiebreak, conflict),
--   never two configurations (two votes).
-- Agreement of two reports a, b of one cell:
--   |a - b| <= max(consensus_span_fraction * span,
--                  stderr_multiplier * sqrt(se_a^2 + se_b^2)   -- only when both publish a stderr)
--   span = the declared range (range_max - range_min), or, for benchmarks without one
--   (ratings), the observed span of the benchmark's screened scores.
-- A cell resolves in four ordered rules (each a CTE):
--   consensus          every pair agrees (exact duplicates included): median of all reports;
--                      repetition earns no weight (one row, whatever the count)
--   protocol_tiebreak  otherwise, averaged runs beat single attempts ('single_attempt_vs_average'),
--                      then mixed shot counts resolve to the benchmark's modal shot count, or,
--                      when the cell lacks it, to the cell's regime most common on the benchmark
--                      ('non_modal_shots'; unpublished shots are not a regime and stay);
--                      then, while the remaining reports still disagree, the preference of seed 002,
--                      one step at a time: the best verification class ('weaker_verification';
--                      order verification_order), the newest evaluation date ('older_evaluation'; a
--                      report without a date is not newer than a dated one), the most trusted source
--                      ('lower_source_trust'; order source_trust_order);
--                      if the remaining reports agree: their median (resolution 'tiebreak')
--   majority           otherwise, with >= 3 remaining reports, exactly one report whose removal
--                      leaves only agreeing pairs is removed ('majority_outlier'): median of the rest
--   conflict           otherwise every report of the cell is excluded ('unresolved_conflict')
--                      and listed in audit_conflicts
-- Variables: consensus_span_fraction, stderr_multiplier, verification_order, source_trust_order.

CREATE OR REPLACE TEMP TABLE _resolved_decisions AS
WITH
benchmark_span AS (
    SELECT s.benchmark,
           coalesce(any_value(b.range_max) - any_value(b.range_min), max(s.score) - min(s.score)) AS span
    FROM screened_scores AS s
    JOIN registry_benchmarks AS b USING (benchmark)
    GROUP BY s.benchmark
),
benchmark_shot_regimes AS (
    -- shot counts of the benchmark ranked by how often it is reported so (1 = modal; ties: fewer shots)
    SELECT benchmark, shots,
           row_number() OVER (PARTITION BY benchmark ORDER BY count(*) DESC, shots) AS regime_rank
    FROM screened_scores
    WHERE shots IS NOT NULL
    GROUP BY benchmark, shots
),
shared_files AS (
    -- files that republish another source's file, and the files they republish
    SELECT source, file FROM registry_files WHERE republishes_source IS NOT NULL
    UNION
    SELECT republishes_source, republishes_file FROM registry_files WHERE republishes_source IS NOT NULL
),
keyed AS (
    SELECT s.*,
           CASE WHEN f.file IS NOT NULL AND m.model IS NOT NULL AND m.reasoning_state IS NOT NULL
                THEN m.model || ' @ ' || m.reasoning_state || coalesce(' ' || m.budget_tokens || ' tokens', '')
                ELSE s.model_id END
           || coalesce(' | ' || nullif(s.harness, ''), '') AS config_id
    FROM screened_scores AS s
    LEFT JOIN shared_files AS f USING (source, file)
    LEFT JOIN registry_model_ids AS m ON f.file IS NOT NULL AND m.model_id = s.model_id
),
reports AS (
    SELECT s.row_key, s.source, s.source_class, s.model_id, nullif(s.harness, '') AS harness, s.benchmark,
           s.config_id,
           s.config_id || chr(31) || s.benchmark AS cell,
           s.score, s.stderr, s.shots, s.effective_protocol, s.evaluated_on, s.verification_class,
           coalesce(list_position(getvariable('verification_order'), s.verification_class), 99) AS class_rank,
           coalesce(list_position(getvariable('source_trust_order'), s.source), 99) AS trust_rank,
           sp.span, sr.regime_rank,
           count(*) OVER (PARTITION BY s.config_id, s.benchmark) AS n_reports
    FROM keyed AS s
    JOIN benchmark_span AS sp USING (benchmark)
    LEFT JOIN benchmark_shot_regimes AS sr USING (benchmark, shots)
),
report_pairs AS (
    SELECT a.cell, a.row_key AS key_a, b.row_key AS key_b,
           abs(a.score - b.score) <= greatest(
               getvariable('consensus_span_fraction') * a.span,
               coalesce(getvariable('stderr_multiplier') * sqrt(a.stderr ^ 2 + b.stderr ^ 2), 0)
           ) AS agree
    FROM reports AS a
    JOIN reports AS b ON a.cell = b.cell AND a.row_key < b.row_key
    WHERE a.n_reports >= 2 AND b.n_reports >= 2
),
-- (a) consensus: cells with no disagreeing pair (a lone report trivially so)
consensus AS (
    SELECT *, 'single_report' AS resolution, NULL::VARCHAR AS reason, NULL::VARCHAR AS set_aside_by
    FROM reports
    WHERE n_reports = 1
    UNION ALL
    SELECT *, 'consensus' AS resolution, NULL::VARCHAR AS reason, NULL::VARCHAR AS set_aside_by
    FROM reports
    WHERE n_reports > 1 AND cell NOT IN (SELECT cell FROM report_pairs WHERE NOT agree)
),
contested AS (
    SELECT * FROM reports WHERE n_reports > 1 AND cell IN (SELECT cell FROM report_pairs WHERE NOT agree)
),
-- (b) protocol tiebreak, step 1: averaged runs beat single attempts
average_beats_single AS (
    SELECT *,
           CASE WHEN effective_protocol = 'single'
                 AND bool_or(effective_protocol = 'average') OVER (PARTITION BY cell)
                THEN 'single_attempt_vs_average' END AS set_aside_by
    FROM contested
),
-- (b) protocol tiebreak, step 2: mixed shot counts resolve to the benchmark's modal regime
-- (the cell's most common regime on the benchmark when the modal one itself is absent)
modal_shot_regime AS (
    SELECT * REPLACE (
        CASE WHEN set_aside_by IS NULL AND shots IS NOT NULL
              AND count(DISTINCT CASE WHEN set_aside_by IS NULL THEN shots END) OVER (PARTITION BY cell) >= 2
              AND regime_rank > min(CASE WHEN set_aside_by IS NULL THEN regime_rank END) OVER (PARTITION BY cell)
             THEN 'non_modal_shots' ELSE set_aside_by END AS set_aside_by)
    FROM average_beats_single
),
-- (b) preference (seed 002), applied one step at a time while the remaining reports still disagree
disagree_after_shots AS (
    SELECT DISTINCT p.cell
    FROM report_pairs AS p
    JOIN modal_shot_regime AS a ON a.row_key = p.key_a AND a.set_aside_by IS NULL
    JOIN modal_shot_regime AS b ON b.row_key = p.key_b AND b.set_aside_by IS NULL
    WHERE NOT p.agree
),
prefer_verification AS (
    SELECT * REPLACE (
        CASE WHEN set_aside_by IS NULL AND cell IN (SELECT cell FROM disagree_after_shots)
              AND class_rank > min(CASE WHEN set_aside_by IS NULL THEN class_rank END) OVER (PARTITION BY cell)
             THEN 'weaker_verification' ELSE set_aside_by END AS set_aside_by)
    FROM modal_shot_regime
),
disagree_after_verification AS (
    SELECT DISTINCT p.cell
    FROM report_pairs AS p
    JOIN prefer_verification AS a ON a.row_key = p.key_a AND a.set_aside_by IS NULL
    JOIN prefer_verification AS b ON b.row_key = p.key_b AND b.set_aside_by IS NULL
    WHERE NOT p.agree
),
prefer_newer_evaluation AS (
    SELECT * REPLACE (
        CASE WHEN set_aside_by IS NULL AND cell IN (SELECT cell FROM disagree_after_verification)
              AND coalesce(evaluated_on < newest_evaluation, newest_evaluation IS NOT NULL)
             THEN 'older_evaluation' ELSE set_aside_by END AS set_aside_by)
    FROM (SELECT *, max(CASE WHEN set_aside_by IS NULL THEN evaluated_on END) OVER (PARTITION BY cell) AS newest_evaluation
          FROM prefer_verification)
),
disagree_after_evaluation AS (
    SELECT DISTINCT p.cell
    FROM report_pairs AS p
    JOIN prefer_newer_evaluation AS a ON a.row_key = p.key_a AND a.set_aside_by IS NULL
    JOIN prefer_newer_evaluation AS b ON b.row_key = p.key_b AND b.set_aside_by IS NULL
    WHERE NOT p.agree
),
prefer_source_trust AS (
    SELECT * EXCLUDE (newest_evaluation) REPLACE (
        CASE WHEN set_aside_by IS NULL AND cell IN (SELECT cell FROM disagree_after_evaluation)
              AND trust_rank > min(CASE WHEN set_aside_by IS NULL THEN trust_rank END) OVER (PARTITION BY cell)
             THEN 'lower_source_trust' ELSE set_aside_by END AS set_aside_by)
    FROM prefer_newer_evaluation
),
survivor_pairs AS (
    SELECT p.*
    FROM report_pairs AS p
    JOIN prefer_source_trust AS a ON a.row_key = p.key_a AND a.set_aside_by IS NULL
    JOIN prefer_source_trust AS b ON b.row_key = p.key_b AND b.set_aside_by IS NULL
),
protocol_tiebreak AS (
    SELECT *, 'tiebreak' AS resolution, set_aside_by AS reason
    FROM prefer_source_trust
    WHERE cell NOT IN (SELECT cell FROM survivor_pairs WHERE NOT agree)
),
still_contested AS (
    SELECT * FROM prefer_source_trust WHERE cell IN (SELECT cell FROM survivor_pairs WHERE NOT agree)
),
-- (c) majority: one report carrying every disagreement among >= 3 survivors
survivor_disagreements AS (
    SELECT cell, key_a AS row_key FROM survivor_pairs WHERE NOT agree
    UNION ALL
    SELECT cell, key_b AS row_key FROM survivor_pairs WHERE NOT agree
),
survivor_counts AS (
    SELECT cell, count(*) FILTER (WHERE set_aside_by IS NULL) AS n_survivors
    FROM still_contested GROUP BY cell
),
disagreement_counts AS (
    SELECT cell, count(*) AS n_disagreeing FROM survivor_pairs WHERE NOT agree GROUP BY cell
),
outlier_candidates AS (
    SELECT d.cell, d.row_key
    FROM survivor_disagreements AS d
    JOIN disagreement_counts USING (cell)
    JOIN survivor_counts USING (cell)
    WHERE n_survivors >= 3
    GROUP BY d.cell, d.row_key, n_disagreeing
    HAVING count(*) = n_disagreeing
),
lone_outlier AS (
    SELECT cell, any_value(row_key) AS outlier_key
    FROM outlier_candidates
    GROUP BY cell
    HAVING count(*) = 1
),
majority AS (
    SELECT s.* REPLACE (CASE WHEN s.row_key = o.outlier_key THEN 'majority_outlier' ELSE s.set_aside_by END AS set_aside_by),
           'majority' AS resolution,
           CASE WHEN s.row_key = o.outlier_key THEN 'majority_outlier' ELSE s.set_aside_by END AS reason
    FROM still_contested AS s
    JOIN lone_outlier AS o USING (cell)
),
-- (d) conflict: everything else in the cell is excluded and queued
conflict AS (
    SELECT *, 'conflict' AS resolution, 'unresolved_conflict' AS reason
    FROM still_contested
    WHERE cell NOT IN (SELECT cell FROM lone_outlier)
)
SELECT * FROM consensus
UNION ALL BY NAME SELECT * FROM protocol_tiebreak
UNION ALL BY NAME SELECT * FROM majority
UNION ALL BY NAME SELECT * FROM conflict;

CREATE OR REPLACE TABLE resolved_cells AS
WITH
kept AS (
    SELECT * FROM _resolved_decisions WHERE reason IS NULL
),
-- most cells have one report: they skip the aggregation (same columns, same values)
single_report_cells AS (
    SELECT model_id, harness, config_id, benchmark, score, stderr, shots, effective_protocol, resolution,
           1 AS n_reports, 1 AS n_reports_cell, 0.0 AS spread, [row_key] AS row_keys,
           verification_class, [source] AS sources
    FROM kept
    WHERE n_reports = 1
),
multi_report_cells AS (
    -- a republished cell holds several published identifiers of one canonical configuration: all map
    -- to the same model and state, the first (alphabetically) stands for them
    SELECT min(model_id) AS model_id, harness, config_id, benchmark,
           median(score) AS score,
           median(stderr) AS stderr,
           CASE WHEN count(DISTINCT shots) = 1 THEN min(shots) END AS shots,
           CASE WHEN count(DISTINCT effective_protocol) = 1 THEN min(effective_protocol) ELSE 'mixed' END AS effective_protocol,
           any_value(resolution) AS resolution,
           count(*) AS n_reports,
           any_value(n_reports) AS n_reports_cell,
           max(score) - min(score) AS spread,
           list_sort(list(row_key)) AS row_keys,
           -- the strongest class among the reports behind the value (seed 002 order)
           arg_min(verification_class, class_rank) AS verification_class,
           list_sort(list(DISTINCT source)) AS sources
    FROM kept
    WHERE n_reports > 1
    GROUP BY config_id, harness, benchmark
)
SELECT model_id, harness, config_id, benchmark, score, stderr, shots, effective_protocol, resolution,
       n_reports::INTEGER AS n_reports, n_reports_cell::INTEGER AS n_reports_cell, spread, row_keys,
       verification_class, sources
FROM (SELECT * FROM single_report_cells UNION ALL BY NAME SELECT * FROM multi_report_cells);

CREATE OR REPLACE TABLE audit_conflicts AS
SELECT model_id, harness, config_id, benchmark, row_key, source, source_class, score, stderr, shots,
       effective_protocol AS sampling_protocol, set_aside_by, n_reports::INTEGER AS n_reports,
       verification_class, evaluated_on,
       max(score) OVER (PARTITION BY cell) - min(score) OVER (PARTITION BY cell) AS cell_spread
FROM _resolved_decisions
WHERE resolution = 'conflict'
ORDER BY config_id, benchmark, row_key;

DELETE FROM audit_exclusions WHERE stage = 'resolved_cells';
INSERT INTO audit_exclusions
SELECT 'resolved_cells', reason, row_key, [row_key], benchmark, NULL, model_id, NULL, score,
       to_json({config_id: config_id, resolution: resolution, n_reports: n_reports, span: span,
                stderr: stderr, shots: shots, shot_regime_rank: regime_rank, effective_protocol: effective_protocol,
                source: source, verification_class: verification_class, evaluated_on: evaluated_on})
FROM _resolved_decisions
WHERE reason IS NOT NULL;

DROP TABLE _resolved_decisions;
