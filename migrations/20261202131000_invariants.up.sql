-- Hand-written invariants that ent cannot express.

-- An agent version is immutable once written: a turn pins one, and what it
-- means must never change under that turn.
CREATE FUNCTION turngate_refuse_update() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  RAISE EXCEPTION '% rows are immutable', TG_TABLE_NAME USING ERRCODE = 'restrict_violation';
END;
$$;

CREATE TRIGGER agent_versions_immutable
  BEFORE UPDATE ON agent_versions
  FOR EACH ROW EXECUTE FUNCTION turngate_refuse_update();

-- The journal is append-only: an entry, once at a position, stays as it is.
CREATE TRIGGER journal_entries_append_only
  BEFORE UPDATE OR DELETE ON journal_entries
  FOR EACH ROW EXECUTE FUNCTION turngate_refuse_update();

-- Journal kinds and turn states are a closed set.
ALTER TABLE journal_entries ADD CONSTRAINT journal_entries_kind_check CHECK (kind IN (
  'turn_accepted', 'turn_started', 'answer_delta', 'tool_requested', 'tool_completed',
  'approval_requested', 'approval_decided', 'steer_delivered', 'checkpoint', 'compaction',
  'turn_answer', 'turn_terminal', 'member_joined', 'member_left'));
ALTER TABLE turns ADD CONSTRAINT turns_state_check
  CHECK (state IN ('queued', 'running', 'completed', 'failed', 'cancelled'));
-- A running turn always holds a lease; a terminal turn never does.
ALTER TABLE turns ADD CONSTRAINT turns_lease_check CHECK (
  (state = 'running') = (lease_expires_at IS NOT NULL));
