-- Stage 5 of the cleaning chain: scaling and family aggregation.
-- In:  pooled_states, registry_benchmarks.
-- Out: family_observations, one row per (model, reasoning_state, family): one likelihood vote.
-- Scale: bounded benchmarks go on the declared range, u = (s - min) / (max - min) in [0, 1];
--        a countable benchmark (registry items) also keeps correct = round(u * items) of items
--        (95.45 % of 198 -> 189); ratings (Elo, ...) are z-scored per benchmark, averaged, and
--        standardized again within the family (stage 6 re-standardizes what it keeps).
-- Rules (each a CTE, applied in this order; a row is charged to the first rule that drops it):
--   safety_benchmark          safety families measure behaviour, not the capability axis
--   composite_index           composite indexes re-count their inputs (also caught in stage 1)
--   diagnostic_role           diagnostics never enter a family
--   unbounded_kind            unbounded quantities (e.g. minutes) have no common scale
--   bounded_without_range     a bounded benchmark needs a declared range to be scaled
--   benchmark_constant        a benchmark whose pooled scores never vary carries no information
--   family_mixed_kinds        a family mixing bounded and rating benchmarks has no single scale
--   family_uses_primary       the family's primary alone reaches primary_min_models models and
--                             primary_min_share of the family's models: the other benchmarks
--                             of the family are not used
--   primary_under_covered     otherwise the components are averaged; the primary is not used
--                             (a family with a primary and no components uses the primary)
-- Family floor c_j: the mean guessing floor of the family's selected benchmarks (0 for ratings).
-- Variables: primary_min_models, primary_min_share, zero_variance_epsilon.

CREATE OR REPLACE TEMP TABLE _family_decisions AS
WITH
states AS (
    SELECT p.model, p.reasoning_state, p.benchmark, p.score, p.n_configs, p.row_keys,
           b.family, b.role, b.kind, b.range_min, b.range_max, b.floor, b.items, b.is_safety, b.is_composite,
           NULL::VARCHAR AS reason
    FROM pooled_states AS p
    JOIN registry_benchmarks AS b USING (benchmark)
),
-- each rule CTE passes every row on and names itself as the reason of the rows it is the
-- first to drop (rows an earlier rule dropped keep that rule's reason)
safety_benchmark AS (
    SELECT * REPLACE (coalesce(reason, CASE WHEN is_safety THEN 'safety_benchmark' END) AS reason) FROM states
),
composite_index AS (
    SELECT * REPLACE (coalesce(reason, CASE WHEN is_composite THEN 'composite_index' END) AS reason) FROM safety_benchmark
),
diagnostic_role AS (
    SELECT * REPLACE (coalesce(reason, CASE WHEN role NOT IN ('primary', 'component') THEN 'diagnostic_role' END) AS reason)
    FROM composite_index
),
unbounded_kind AS (
    SELECT * REPLACE (coalesce(reason, CASE WHEN kind NOT IN ('bounded', 'rating') THEN 'unbounded_kind' END) AS reason)
    FROM diagnostic_role
),
bounded_without_range AS (
    SELECT * REPLACE (coalesce(reason,
        CASE WHEN kind = 'bounded' AND (range_min IS NULL OR range_max IS NULL OR range_max <= range_min)
             THEN 'bounded_without_range' END) AS reason)
    FROM unbounded_kind
),
benchmark_constant AS (
    SELECT r.* REPLACE (coalesce(r.reason, CASE WHEN c.benchmark IS NOT NULL THEN 'benchmark_constant' END) AS reason)
    FROM bounded_without_range AS r
    LEFT JOIN (
        SELECT benchmark FROM bounded_without_range WHERE reason IS NULL GROUP BY benchmark
        HAVING max(score) - min(score) <= getvariable('zero_variance_epsilon')
    ) AS c USING (benchmark)
),
family_mixed_kinds AS (
    SELECT r.* REPLACE (coalesce(r.reason, CASE WHEN m.family IS NOT NULL THEN 'family_mixed_kinds' END) AS reason)
    FROM benchmark_constant AS r
    LEFT JOIN (
        SELECT family FROM benchmark_constant WHERE reason IS NULL GROUP BY family HAVING count(DISTINCT kind) > 1
    ) AS m USING (family)
),
benchmark_coverage AS (
    SELECT family, benchmark, any_value(role) AS role, count(DISTINCT model) AS n_models
    FROM family_mixed_kinds WHERE reason IS NULL GROUP BY family, benchmark
),
family_coverage AS (
    SELECT family, count(DISTINCT model) AS n_models, bool_or(role = 'component') AS has_components
    FROM family_mixed_kinds WHERE reason IS NULL GROUP BY family
),
best_primary AS (
    SELECT family, benchmark AS primary_benchmark, n_models AS primary_models
    FROM (
        SELECT *, row_number() OVER (PARTITION BY family ORDER BY n_models DESC, benchmark) AS rank
        FROM benchmark_coverage WHERE role = 'primary'
    )
    WHERE rank = 1
),
family_selection AS (
    SELECT f.family, p.primary_benchmark, p.primary_models, f.n_models AS family_models,
           CASE WHEN p.primary_benchmark IS NOT NULL
                 AND (NOT f.has_components
                      OR (p.primary_models >= getvariable('primary_min_models')
                          AND p.primary_models >= getvariable('primary_min_share') * f.n_models))
                THEN 'primary' ELSE 'components' END AS selection
    FROM family_coverage AS f
    LEFT JOIN best_primary AS p USING (family)
),
with_selection AS (
    SELECT r.*, s.selection, s.primary_benchmark, s.primary_models, s.family_models
    FROM family_mixed_kinds AS r
    LEFT JOIN family_selection AS s USING (family)
),
family_uses_primary AS (
    SELECT * REPLACE (coalesce(reason,
        CASE WHEN selection = 'primary' AND benchmark <> primary_benchmark THEN 'family_uses_primary' END) AS reason)
    FROM with_selection
),
primary_under_covered AS (
    SELECT * REPLACE (coalesce(reason,
        CASE WHEN selection = 'components' AND role = 'primary' THEN 'primary_under_covered' END) AS reason)
    FROM family_uses_primary
)
SELECT * FROM primary_under_covered;

CREATE OR REPLACE TEMP TABLE _family_scaled AS
SELECT *,
       CASE kind
           WHEN 'bounded' THEN least(greatest((score - range_min) / (range_max - range_min), 0.0), 1.0)
           ELSE (score - avg(score) OVER (PARTITION BY benchmark)) / stddev_samp(score) OVER (PARTITION BY benchmark)
       END AS u_benchmark
FROM _family_decisions
WHERE reason IS NULL;

CREATE OR REPLACE TABLE family_observations AS
WITH
family_floor AS (
    -- unweighted mean over the family's selected benchmarks (not over rows)
    SELECT family, avg(floor) AS family_floor
    FROM (SELECT DISTINCT family, benchmark, CASE WHEN kind = 'bounded' THEN floor ELSE 0.0 END AS floor FROM _family_scaled)
    GROUP BY family
),
selected AS (
    SELECT *, count(*) OVER (PARTITION BY model, reasoning_state, family) AS n_selected
    FROM _family_scaled
),
-- one benchmark behind the observation (always so for a primary): no aggregation needed
one_benchmark AS (
    SELECT model, reasoning_state, family, kind, u_benchmark AS u,
           CASE WHEN items IS NOT NULL THEN round(u_benchmark * items) END AS correct,
           items, 1 AS n_components, selection, [benchmark] AS benchmarks, n_configs, row_keys
    FROM selected
    WHERE n_selected = 1
),
-- components: averaged into one observation (one likelihood vote); their count is metadata
averaged_components AS (
    SELECT model, reasoning_state, family,
           any_value(kind) AS kind,
           avg(u_benchmark) AS u,
           NULL AS correct,
           NULL AS items,
           count(*) AS n_components,
           any_value(selection) AS selection,
           list_sort(list(benchmark)) AS benchmarks,
           sum(n_configs) AS n_configs,
           list_sort(flatten(list(row_keys))) AS row_keys
    FROM selected
    WHERE n_selected > 1
    GROUP BY model, reasoning_state, family
),
observations AS (
    SELECT model, reasoning_state, family, kind, u, correct::INTEGER AS correct, items::INTEGER AS items,
           n_components::INTEGER AS n_components, selection, benchmarks, n_configs::INTEGER AS n_configs, row_keys
    FROM (SELECT * FROM one_benchmark UNION ALL SELECT * FROM averaged_components)
)
SELECT o.model, o.reasoning_state, o.family, o.kind,
       CASE WHEN o.kind = 'rating'
            THEN coalesce((o.u - avg(o.u) OVER w) / nullif(stddev_samp(o.u) OVER w, 0), 0.0)
            ELSE o.u END AS u,
       o.correct, o.items, ff.family_floor AS floor, o.n_components,
       o.selection, o.benchmarks, o.n_configs, o.row_keys
FROM observations AS o
JOIN family_floor AS ff USING (family)
WINDOW w AS (PARTITION BY o.family);

DELETE FROM audit_exclusions WHERE stage = 'family_observations';
INSERT INTO audit_exclusions
SELECT 'family_observations', reason, model || ' / ' || reasoning_state || ' :: ' || benchmark, row_keys,
       benchmark, family, NULL, model, score,
       to_json({reasoning_state: reasoning_state, role: role, kind: kind, selection: selection,
                primary_benchmark: primary_benchmark, primary_models: primary_models, family_models: family_models})
FROM _family_decisions
WHERE reason IS NOT NULL;

DROP TABLE _family_decisions;
DROP TABLE _family_scaled;
