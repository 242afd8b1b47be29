-- Hand-written invariants that ent cannot express.

-- An agent version is immutable once written and never deleted: a turn
-- pins one (without a foreign key, see ent/schema/turn.go), and what it
-- means must never change under that turn.
CREATE FUNCTION turngate_refuse_update() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  RAISE EXCEPTION '% rows are immutable', TG_TABLE_NAME USING ERRCODE = 'restrict_violation';
END;
$$;

CREATE TRIGGER agent_versions_immutable
  BEFORE UPDATE OR DELETE ON agent_versions
  FOR EACH ROW EXECUTE FUNCTION turngate_refuse_update();

-- The journal is append-only: an entry, once at a position, stays as it is.
CREATE TRIGGER journal_entries_append_only
  BEFORE UPDATE OR DELETE ON journal_entries
  FOR EACH ROW EXECUTE FUNCTION turngate_refuse_update();
