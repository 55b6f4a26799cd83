-- The raw snapshot each source's scores came from: per source, the newest attempt whose content parsed
-- and gave scores, with the time that content was FIRST retrieved. Later conditional requests that found
-- it unchanged add rows but not a new content hash, so republishing unchanged data gives the same record.
WITH usable AS (
    SELECT source, url, sha256, bytes, origin, retrieved_at,
           row_number() OVER (PARTITION BY source ORDER BY retrieved_at DESC) AS recency
    FROM source_snapshots
    WHERE parsed_ok AND sha256 IS NOT NULL AND coalesce(score_rows, 0) > 0
),
first_seen AS (
    SELECT sha256, min(retrieved_at) AS first_retrieved_at
    FROM source_snapshots
    WHERE sha256 IS NOT NULL
    GROUP BY sha256
)
SELECT u.source, u.url, u.sha256, u.bytes, u.origin, f.first_retrieved_at
FROM usable AS u
JOIN first_seen AS f USING (sha256)
WHERE u.recency = 1
ORDER BY u.source;
