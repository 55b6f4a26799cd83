-- The active panel (issue 12, seed 004 §04): a family is active while it has a result dated within
-- $window_days of the snapshot's newest result. A result is dated by its own evaluation date (the newest of the
-- raw rows behind a modeled observation), else by its model's release date. Deterministic for a snapshot: the
-- reference date is the data's newest result, not the wall clock.
WITH observation_dates AS (
    SELECT o.family, o.model, o.reasoning_state,
           max(r.evaluated_on) AS evaluated_on,
           max(o.released_on) AS released_on
    FROM modeled_observations AS o, UNNEST(o.row_keys) AS k(row_key)
    LEFT JOIN raw_scores AS r ON r.row_key = k.row_key
    GROUP BY o.family, o.model, o.reasoning_state
),
families AS (
    SELECT family,
           count(*) AS n_obs,
           count(evaluated_on) AS n_dated_by_result,
           count(*) FILTER (WHERE evaluated_on IS NULL AND released_on IS NOT NULL) AS n_dated_by_release,
           count(*) FILTER (WHERE evaluated_on IS NULL AND released_on IS NULL) AS n_undated,
           max(coalesce(evaluated_on, released_on)) AS last_result_on
    FROM observation_dates
    GROUP BY family
),
as_of AS (SELECT max(last_result_on) AS as_of FROM families)
SELECT f.family, f.n_obs, f.n_dated_by_result, f.n_dated_by_release, f.n_undated, f.last_result_on,
       a.as_of, $window_days AS window_days,
       coalesce(f.last_result_on >= a.as_of - to_days($window_days), false) AS active,
       CASE WHEN f.last_result_on IS NULL THEN 'no dated result'
            WHEN f.last_result_on >= a.as_of - to_days($window_days) THEN 'a result within the window'
            ELSE 'newest result ' || strftime(f.last_result_on, '%Y-%m-%d') || ', more than '
                 || $window_days || ' days before ' || strftime(a.as_of, '%Y-%m-%d') END AS reason
FROM families AS f, as_of AS a
ORDER BY f.family
