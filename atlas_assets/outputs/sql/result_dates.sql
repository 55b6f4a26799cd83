-- The one rule that dates a result (issue 12), read by the active panel (outputs/sql/active_panel.sql, seed 004
-- §04) and by the live pool of family_quality (outputs/family_quality.py, seed 002): two readers of one
-- definition cannot disagree on a date, on the snapshot date or on the window.
--
-- Table macro result_dates(window_days): one row per modeled observation (model x reasoning state x family) with
--   evaluated_on   the newest evaluation date of the raw rows behind it (raw_scores, through its row_keys)
--   released_on    its model's release date
--   result_date    evaluated_on, else released_on; NULL when neither is known (undated: never recent)
--   dated_by       'evaluated' | 'release' | 'undated'
--   as_of          the snapshot date: the newest result_date in the data, not the wall clock, so a
--                  republication of the same data reproduces it
--   window_start   as_of - window_days; recent: result_date >= window_start
-- and the observation's kind and score u, which the live pool ranks.
CREATE OR REPLACE TEMP MACRO result_dates(window_days) AS TABLE
WITH observations AS (
    SELECT o.model, o.reasoning_state, o.family,
           any_value(o.kind) AS kind, any_value(o.u) AS u,
           max(r.evaluated_on) AS evaluated_on,
           max(o.released_on) AS released_on
    FROM modeled_observations AS o, UNNEST(o.row_keys) AS k(row_key)
    LEFT JOIN raw_scores AS r ON r.row_key = k.row_key
    GROUP BY o.model, o.reasoning_state, o.family
),
dated AS (
    SELECT *, coalesce(evaluated_on, released_on) AS result_date,
           CASE WHEN evaluated_on IS NOT NULL THEN 'evaluated'
                WHEN released_on IS NOT NULL THEN 'release'
                ELSE 'undated' END AS dated_by
    FROM observations
),
snapshot AS (
    SELECT as_of, CAST(as_of - to_days(CAST(window_days AS INTEGER)) AS DATE) AS window_start
    FROM (SELECT max(result_date) AS as_of FROM dated)
)
SELECT d.model, d.reasoning_state, d.family, d.kind, d.u, d.evaluated_on, d.released_on, d.result_date, d.dated_by,
       s.as_of, CAST(window_days AS INTEGER) AS window_days, s.window_start,
       coalesce(d.result_date >= s.window_start, false) AS recent
FROM dated AS d, snapshot AS s
ORDER BY d.model, d.reasoning_state, d.family;
