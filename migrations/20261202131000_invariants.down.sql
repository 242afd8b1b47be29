ALTER TABLE turns DROP CONSTRAINT turns_lease_check;
ALTER TABLE turns DROP CONSTRAINT turns_state_check;
ALTER TABLE journal_entries DROP CONSTRAINT journal_entries_kind_check;
DROP TRIGGER journal_entries_append_only ON journal_entries;
DROP TRIGGER agent_versions_immutable ON agent_versions;
DROP FUNCTION turngate_refuse_update();
