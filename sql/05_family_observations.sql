-- Stage 5 of the cleaning chain: scaling and family selection.
-- In:  pooled_states, registry_benchmarks, audit_conflicts, registry_model_ids.
-- Out: family_observations, one row per (model, reasoning_state, family): one likelihood vote.
-- Scale: bounded benchmarks go on the declared range, u = (s - min) / (max - min) in [0, 1];
--        a countable benchmark (registry items) also keeps correct = round(u * items) of items
--        (95.45 % of 198 -> 189); ratings (Elo, ...) are z-scored per benchmark and
--        standardized within the family (stage 6 re-standardizes what it keeps).
-- One benchmark per family (a family's column means the same for every state): the primary
-- when it alone reaches primary_min_models models and primary_min_share of the family's
-- models, or when the family has no components; otherwise the family's best covered single
-- benchmark, i.e. its best covered component unless the primary covers at least as many models.
-- Components are never averaged: an average over whatever subset each state has would change
-- the column's definition from state to state, and a fixed set of several components covers
-- at most the states of its worst covered member (docs/cleaning.md, "Family selection").
-- Rules (each a CTE, applied in this order; a row is charged to the first rule that drops it):
--   safety_benchmark          safety families measure behaviour, not the capability axis
--   composite_index           composite indexes re-count their inputs (also caught in stage 1)
--   diagnostic_role           diagnostics never enter a family
--   unbounded_kind            unbounded quantities (e.g. minutes) have no common scale
--   bounded_without_range     a bounded benchmark needs a declared range to be scaled
--   benchmark_constant        a benchmark whose pooled scores never vary carries no information
--   family_mixed_kinds        a family mixing bounded and rating benchmarks has no single scale
--   conflict_blocks_family    the state's cell on the family's selected benchmark ended as a
--                             stage-3 conflict (audit_conflicts) and the state has no score on
--                             it: a conflicted cell is not filled from another benchmark, so
--                             the state's other rows in the family go with this reason
--   family_uses_primary       the family uses its primary: its other benchmarks are not used
--   primary_under_covered     the family uses a component: its primary is not used
--   family_uses_component     the family uses another (better covered) component
-- Family floor c_j: the guessing floor of the family's selected benchmark (0 for ratings).
-- Variables: primary_min_models, primary_min_share, zero_variance_epsilon.

CREATE OR REPLACE TEMP TABLE _family_decisions AS
WITH
states AS (
    SELECT p.model, p.reasoning_state, p.benchmark, p.score, p.n_configs, p.row_keys, p.verification_class,
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
best_of_role AS (
    -- per family and role, the benchmark scored for the most models (ties: benchmark key)
    SELECT family, role, benchmark, n_models
    FROM (
        SELECT *, row_number() OVER (PARTITION BY family, role ORDER BY n_models DESC, benchmark) AS rank
        FROM benchmark_coverage
    )
    WHERE rank = 1
),
family_selection AS (
    SELECT f.family, p.benchmark AS primary_benchmark, p.n_models AS primary_models,
           c.benchmark AS component_benchmark, c.n_models AS component_models, f.n_models AS family_models,
           CASE WHEN p.benchmark IS NOT NULL
                 AND (c.benchmark IS NULL
                      OR (p.n_models >= getvariable('primary_min_models')
                          AND p.n_models >= getvariable('primary_min_share') * f.n_models)
                      OR p.n_models >= c.n_models)
                THEN 'primary' ELSE 'component' END AS selection
    FROM family_coverage AS f
    LEFT JOIN best_of_role AS p ON p.family = f.family AND p.role = 'primary'
    LEFT JOIN best_of_role AS c ON c.family = f.family AND c.role = 'component'
),
with_selection AS (
    SELECT r.*, s.selection, s.primary_benchmark, s.primary_models, s.component_benchmark, s.component_models,
           s.family_models,
           CASE s.selection WHEN 'primary' THEN s.primary_benchmark ELSE s.component_benchmark END AS selected_benchmark
    FROM family_mixed_kinds AS r
    LEFT JOIN family_selection AS s USING (family)
),
-- stage-3 conflicts, carried to the grain of a state: (model, reasoning state, benchmark)
conflicted_states AS (
    SELECT DISTINCT m.model, m.reasoning_state, a.benchmark
    FROM audit_conflicts AS a
    JOIN registry_model_ids AS m USING (model_id)
    WHERE m.model IS NOT NULL AND m.reasoning_state IS NOT NULL
),
with_conflicts AS (
    SELECT w.*,
           x.benchmark AS conflicted_benchmark,
           bool_or(w.reason IS NULL AND w.benchmark = w.selected_benchmark)
               OVER (PARTITION BY w.model, w.reasoning_state, w.family) AS has_selected
    FROM with_selection AS w
    LEFT JOIN conflicted_states AS x
      ON x.model = w.model AND x.reasoning_state = w.reasoning_state AND x.benchmark = w.selected_benchmark
),
conflict_blocks_family AS (
    SELECT * REPLACE (coalesce(reason,
        CASE WHEN conflicted_benchmark IS NOT NULL AND NOT has_selected THEN 'conflict_blocks_family' END) AS reason)
    FROM with_conflicts
),
family_uses_primary AS (
    SELECT * REPLACE (coalesce(reason,
        CASE WHEN selection = 'primary' AND benchmark <> selected_benchmark THEN 'family_uses_primary' END) AS reason)
    FROM conflict_blocks_family
),
primary_under_covered AS (
    SELECT * REPLACE (coalesce(reason,
        CASE WHEN selection = 'component' AND role = 'primary' THEN 'primary_under_covered' END) AS reason)
    FROM family_uses_primary
),
family_uses_component AS (
    SELECT * REPLACE (coalesce(reason,
        CASE WHEN selection = 'component' AND benchmark <> selected_benchmark THEN 'family_uses_component' END) AS reason)
    FROM primary_under_covered
)
SELECT * FROM family_uses_component;

CREATE OR REPLACE TEMP TABLE _family_scaled AS
-- a rating benchmark's mean and sd are taken over its rows in a fixed order: a window aggregate sums in the order
-- the rows arrive, so its last bits (and with them a seeded NUTS trajectory) changed from run to run
WITH benchmark_moments AS (
    SELECT benchmark, avg(score ORDER BY model, reasoning_state) AS mean_score,
           stddev_samp(score ORDER BY model, reasoning_state) AS sd_score
    FROM _family_decisions
    WHERE reason IS NULL
    GROUP BY benchmark
)
SELECT d.*,
       CASE d.kind
           WHEN 'bounded' THEN least(greatest((d.score - d.range_min) / (d.range_max - d.range_min), 0.0), 1.0)
           ELSE (d.score - m.mean_score) / m.sd_score
       END AS u_benchmark
FROM _family_decisions AS d
LEFT JOIN benchmark_moments AS m USING (benchmark)
WHERE d.reason IS NULL;

CREATE OR REPLACE TABLE family_observations AS
-- one benchmark behind every observation (the family's selected one): no aggregation
WITH observations AS (
    SELECT model, reasoning_state, family, kind, u_benchmark AS u,
           CASE WHEN kind = 'bounded' AND items IS NOT NULL THEN round(u_benchmark * items) END::INTEGER AS correct,
           CASE WHEN kind = 'bounded' THEN items END::INTEGER AS items,
           CASE WHEN kind = 'bounded' THEN floor ELSE 0.0 END AS floor,
           1 AS n_components, selection, [benchmark] AS benchmarks, n_configs::INTEGER AS n_configs, row_keys,
           verification_class
    FROM _family_scaled
),
-- in a fixed order, as above
family_moments AS (
    SELECT family, avg(u ORDER BY model, reasoning_state) AS mean_u, stddev_samp(u ORDER BY model, reasoning_state) AS sd_u
    FROM observations
    GROUP BY family
)
SELECT o.model, o.reasoning_state, o.family, o.kind,
       CASE WHEN o.kind = 'rating'
            THEN coalesce((o.u - m.mean_u) / nullif(m.sd_u, 0), 0.0)
            ELSE o.u END AS u,
       o.correct, o.items, o.floor, o.n_components::INTEGER AS n_components,
       o.selection, o.benchmarks, o.n_configs, o.row_keys, o.verification_class
FROM observations AS o
LEFT JOIN family_moments AS m USING (family);

DELETE FROM audit_exclusions WHERE stage = 'family_observations';
INSERT INTO audit_exclusions
SELECT 'family_observations', reason, model || ' / ' || reasoning_state || ' :: ' || benchmark, row_keys,
       benchmark, family, NULL, model, score,
       to_json({reasoning_state: reasoning_state, role: role, kind: kind, selection: selection,
                selected_benchmark: selected_benchmark, conflicted_benchmark: conflicted_benchmark,
                primary_benchmark: primary_benchmark, primary_models: primary_models,
                component_benchmark: component_benchmark, component_models: component_models,
                family_models: family_models})
FROM _family_decisions
WHERE reason IS NOT NULL;

DROP TABLE _family_decisions;
DROP TABLE _family_scaled;
