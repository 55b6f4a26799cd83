-- Rows in, out, kept and excluded per cleaning stage in the latest cleaning run (the run that wrote the
-- newest row of audit_stage_history), in stage order. Read into the publication's methodology record.
SELECT stage, rows_in, rows_out, rows_kept, rows_excluded, config_fingerprint
FROM audit_stage_history
WHERE run_id = (SELECT run_id FROM audit_stage_history ORDER BY recorded_at DESC LIMIT 1)
ORDER BY recorded_at, stage;
