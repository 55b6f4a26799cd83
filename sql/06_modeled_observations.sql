-- Stage 6 of the cleaning chain: the iterative coverage filter.
-- In:  family_observations, registry_models.
-- Out: modeled_observations, one row per (model, reasoning_state, family): what the Stan
--      model fits; audit_coverage_iterations, one row per round.
-- A recursive query repeats one round until a round removes nothing. In each round, on the
-- rows that are left (first matching rule names the reason):
--   family_too_few_models   the family is observed for fewer than min_models_per_family models
--   family_no_variance      the family's remaining u never vary (max - min <= zero_variance_epsilon)
--   model_too_few_families  the model is observed on fewer than min_families_per_model families,
--                           counted across all its reasoning states (a sparse state borrows
--                           from its model)
-- Before the rounds, rows of the state 'unknown' (a known model, setting not known; stage 4) are
-- set aside, audited as unknown_reasoning_state: the fit needs each row's setting, and they do not
-- count towards any coverage rule.
-- Every rule removes a whole family or a whole model, so the rounds run on the (model, family)
-- incidence with the range of u per pair; the rows follow their pair.
-- All three rules are monotone (removing rows can only make them fire more), so applying them
-- together per round reaches the same largest stable set as applying them one at a time.
-- Ratings are standardized again within each family on the rows that are kept.
-- Variables: min_models_per_family, min_families_per_model, zero_variance_epsilon, max_iterations.

CREATE OR REPLACE TEMP TABLE _coverage_rounds AS
WITH RECURSIVE
-- every rule removes a whole family or a whole model, so the rounds run on the
-- (model, family) incidence, one row per pair, with the range of u over the model's states
model_family AS (
    SELECT model, family, min(u) AS u_min, max(u) AS u_max, count(*) AS n_rows
    FROM family_observations
    WHERE reasoning_state <> 'unknown'
    GROUP BY model, family
),
rounds(iteration, model, family, u_min, u_max, n_rows, reason, changed) AS (
    SELECT 0, model, family, u_min, u_max, n_rows, NULL::VARCHAR, TRUE
    FROM model_family
    UNION ALL
    SELECT iteration, model, family, u_min, u_max, n_rows, reason,
           bool_or(reason IS NOT NULL) OVER () AS changed
    FROM (
        SELECT iteration + 1 AS iteration, model, family, u_min, u_max, n_rows,
               CASE
                   WHEN count(*) OVER (PARTITION BY family) < getvariable('min_models_per_family')
                       THEN 'family_too_few_models'
                   WHEN max(u_max) OVER (PARTITION BY family) - min(u_min) OVER (PARTITION BY family)
                        <= getvariable('zero_variance_epsilon')
                       THEN 'family_no_variance'
                   WHEN count(*) OVER (PARTITION BY model) < getvariable('min_families_per_model')
                       THEN 'model_too_few_families'
               END AS reason
        FROM rounds
        WHERE reason IS NULL AND changed AND iteration < getvariable('max_iterations')
    )
)
SELECT * FROM rounds WHERE iteration > 0;

CREATE OR REPLACE TABLE audit_coverage_iterations AS
SELECT iteration::INTEGER AS iteration,
       sum(n_rows) AS rows_in,
       coalesce(sum(n_rows) FILTER (WHERE reason IS NOT NULL), 0) AS rows_removed,
       count(DISTINCT family) AS families_in,
       count(DISTINCT model) AS models_in,
       coalesce(sum(n_rows) FILTER (WHERE reason = 'family_too_few_models'), 0) AS removed_family_too_few_models,
       coalesce(sum(n_rows) FILTER (WHERE reason = 'family_no_variance'), 0) AS removed_family_no_variance,
       coalesce(sum(n_rows) FILTER (WHERE reason = 'model_too_few_families'), 0) AS removed_model_too_few_families
FROM _coverage_rounds
GROUP BY iteration
ORDER BY iteration;

CREATE OR REPLACE TABLE modeled_observations AS
WITH
kept AS (
    SELECT model, family
    FROM _coverage_rounds
    WHERE reason IS NULL AND iteration = (SELECT max(iteration) FROM _coverage_rounds)
),
observations AS (
    SELECT f.* FROM family_observations AS f SEMI JOIN kept USING (model, family)
    WHERE f.reasoning_state <> 'unknown'
),
-- a rating family's mean and sd over the kept rows in a fixed order: a window aggregate sums in the order the rows
-- arrive, and its last bits (and with them a seeded NUTS trajectory) changed from run to run
family_moments AS (
    SELECT family, avg(u ORDER BY model, reasoning_state) AS mean_u, stddev_samp(u ORDER BY model, reasoning_state) AS sd_u
    FROM observations
    GROUP BY family
)
SELECT o.model, o.reasoning_state, o.family, o.kind,
       CASE WHEN o.kind = 'rating'
            THEN coalesce((o.u - s.mean_u) / nullif(s.sd_u, 0), 0.0)
            ELSE o.u END AS u,
       o.correct, o.items, o.floor, o.n_components,
       m.released_on,
       o.selection, o.benchmarks, o.n_configs, o.row_keys, o.verification_class
FROM observations AS o
LEFT JOIN registry_models AS m USING (model)
LEFT JOIN family_moments AS s USING (family);

DELETE FROM audit_exclusions WHERE stage = 'modeled_observations';
INSERT INTO audit_exclusions
SELECT 'modeled_observations', r.reason, f.model || ' / ' || f.reasoning_state || ' :: ' || f.family,
       f.row_keys, NULL, f.family, NULL, f.model, f.u,
       to_json({iteration: r.iteration, reasoning_state: f.reasoning_state, kind: f.kind, n_components: f.n_components})
FROM (SELECT * FROM _coverage_rounds WHERE reason IS NOT NULL) AS r
JOIN family_observations AS f USING (model, family)
WHERE f.reasoning_state <> 'unknown';
INSERT INTO audit_exclusions
SELECT 'modeled_observations', 'unknown_reasoning_state', f.model || ' / ' || f.reasoning_state || ' :: ' || f.family,
       f.row_keys, NULL, f.family, NULL, f.model, f.u,
       to_json({iteration: 0, reasoning_state: f.reasoning_state, kind: f.kind, n_components: f.n_components})
FROM family_observations AS f
WHERE f.reasoning_state = 'unknown';

DROP TABLE _coverage_rounds;
