-- Lineage of a published number: every row it stands on, from the modeled observations back to the raw
-- rows of the downloads, with every exclusion that touched the state's raw rows on the way.
-- Parameters: $model, $reasoning_state (the state), $family (NULL: every family of the state).
-- Out: one row per raw row, with the stage rows it fed and the exclusions that hit it.
WITH state_ids AS (
    -- the source identifiers the registry maps to this state
    SELECT model_id FROM registry_model_ids WHERE model = $model AND reasoning_state = $reasoning_state
),
modeled AS (
    SELECT family, u, verification_class, unnest(row_keys) AS row_key
    FROM modeled_observations
    WHERE model = $model AND reasoning_state = $reasoning_state AND ($family IS NULL OR family = $family)
),
pooled AS (
    SELECT benchmark, score AS pooled_score, unnest(row_keys) AS row_key
    FROM pooled_states WHERE model = $model AND reasoning_state = $reasoning_state
),
raw AS (
    SELECT r.* FROM raw_scores r
    WHERE r.model_id IN (SELECT model_id FROM state_ids) OR r.row_key IN (SELECT row_key FROM modeled)
),
exclusions AS (
    SELECT key AS row_key, string_agg(stage || ': ' || reason, '; ' ORDER BY stage, reason) AS excluded_by
    FROM (SELECT stage, reason, unnest(row_keys) AS key FROM audit_exclusions)
    WHERE key IN (SELECT row_key FROM raw)
    GROUP BY key
)
SELECT
    r.row_key, r.source, r.file, r.row_number, r.snapshot_sha256, coalesce(d.url, s.url) AS url, r.model_id, r.benchmark, r.score,
    r.score_column, r.harness, r.evaluated_on, r.verification_class,
    p.pooled_score, m.family AS modeled_family, m.u AS modeled_u, m.verification_class AS modeled_verification_class,
    (m.row_key IS NOT NULL) AS informs_the_number,
    x.excluded_by
FROM raw r
LEFT JOIN (SELECT DISTINCT sha256, url FROM source_snapshots) s ON s.sha256 = r.snapshot_sha256
-- a multi-document source: the URL of the document the row came from ('evaluations.json:v1_Semi_Private' -> evaluations.json)
LEFT JOIN source_documents d ON d.snapshot_sha256 = r.snapshot_sha256 AND d.document = split_part(r.file, ':', 1)
LEFT JOIN pooled p ON p.row_key = r.row_key
LEFT JOIN modeled m ON m.row_key = r.row_key
LEFT JOIN exclusions x ON x.row_key = r.row_key
WHERE $family IS NULL OR m.family = $family OR r.benchmark IN (
    SELECT benchmark FROM registry_benchmarks WHERE family = $family)
ORDER BY informs_the_number DESC, r.benchmark, r.source, r.file, r.row_number
