-- One row per (modeled observation, raw row behind it): the dimensions that decide whether two published
-- observations may be compared (seed 002) and when each result was obtained. Traced through the cleaning
-- chain: modeled_observations.row_keys (sql/06, carried from sql/03-05) name the raw_scores rows (sql/00)
-- that fed the observation; screened_scores (sql/02) adds the effective sampling protocol of each row;
-- registry_files names the harness columns the row's harness string was joined from (ingest/tabular.py,
-- ' | ' between the non-empty parts); registry_benchmarks gives each exact benchmark's unit and kind.
WITH keys AS (
    SELECT model, reasoning_state, family, kind, u, verification_class, selection, n_components,
           released_on, list_sort(benchmarks) AS benchmarks, unnest(row_keys) AS row_key
    FROM modeled_observations
)
SELECT k.model, k.reasoning_state, k.family, k.kind, k.u, k.verification_class, k.selection, k.n_components,
       k.released_on, k.benchmarks, k.row_key,
       r.source, r.file, r.benchmark, r.score_column, r.harness, r.shots, r.evaluated_on,
       s.effective_protocol,
       f.harness_columns,
       b.unit, b.kind AS benchmark_kind
FROM keys k
LEFT JOIN raw_scores r USING (row_key)
LEFT JOIN screened_scores s USING (row_key)
LEFT JOIN registry_files f ON f.source = r.source AND f.file = r.file
LEFT JOIN registry_benchmarks b ON b.benchmark = r.benchmark
ORDER BY k.model, k.reasoning_state, k.family, k.row_key
