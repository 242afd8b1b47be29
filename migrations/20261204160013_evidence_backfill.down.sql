-- The backfilled rows cannot be told from recorded ones; nothing to undo.
SELECT 1;
