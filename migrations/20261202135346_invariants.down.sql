DROP TRIGGER journal_entries_append_only ON journal_entries;
DROP TRIGGER agent_versions_immutable ON agent_versions;
DROP FUNCTION turngate_refuse_update();
