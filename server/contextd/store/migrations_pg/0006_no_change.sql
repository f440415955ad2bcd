-- 0006: no schema change; keeps the migration versions contiguous.
SELECT 1;
