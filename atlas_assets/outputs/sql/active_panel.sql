-- The active panel (issue 12, seed 004 §04): a family is active while it has a recent result, one dated within
-- $window_days of the snapshot's newest result. Dates, snapshot date and window come from the result_dates macro
-- (result_dates.sql: a result's own evaluation date, else its model's release date), the rule family_quality's
-- live pool reads too. Deterministic for a snapshot: the reference date is the data's newest result.
WITH families AS (
    SELECT family,
           count(*) AS n_obs,
           count(*) FILTER (WHERE dated_by = 'evaluated') AS n_dated_by_result,
           count(*) FILTER (WHERE dated_by = 'release') AS n_dated_by_release,
           count(*) FILTER (WHERE dated_by = 'undated') AS n_undated,
           max(result_date) AS last_result_on,
           bool_or(recent) AS active,
           any_value(as_of) AS as_of,
           any_value(window_days) AS window_days
    FROM result_dates($window_days)
    GROUP BY family
)
SELECT family, n_obs, n_dated_by_result, n_dated_by_release, n_undated, last_result_on, as_of, window_days, active,
       CASE WHEN last_result_on IS NULL THEN 'no dated result'
            WHEN active THEN 'a result within the window'
            ELSE 'newest result ' || strftime(last_result_on, '%Y-%m-%d') || ', more than '
                 || window_days || ' days before ' || strftime(as_of, '%Y-%m-%d') END AS reason
FROM families
ORDER BY family
