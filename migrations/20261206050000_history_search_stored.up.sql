-- history_search's words, stored: a finished turn's search vector is kept
-- in search_tsv by a trigger (only finished turns are searched, so a
-- queued or running turn pays nothing, and a lease renewal does not
-- recompute it), and the full-text index is over the stored column. The
-- tool then tests a turn's words without recomputing them, which makes
-- its walk over the newest finished turns (turn_history_recent) cheap:
-- for common words the newest matches are found by walking the newest
-- turns and stopping at enough of them, where the full-text index would
-- return nearly every turn of the room to be sorted (tools/history.go).
-- The column is not in the ent schema: nothing but the database writes
-- it, and only the tool reads it.
ALTER TABLE "turns" ADD COLUMN "search_tsv" tsvector;

CREATE FUNCTION turngate_turn_search_tsv() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  NEW.search_tsv := to_tsvector('simple', NEW.input || ' ' || coalesce(NEW.answer, ''));
  RETURN NEW;
END;
$$;

CREATE TRIGGER turns_search_tsv
  BEFORE INSERT OR UPDATE OF state, answer ON turns
  FOR EACH ROW WHEN (NEW.state = 'completed')
  EXECUTE FUNCTION turngate_turn_search_tsv();

UPDATE "turns" SET "search_tsv" = to_tsvector('simple', "input" || ' ' || coalesce("answer", ''))
WHERE "state" = 'completed';

DROP INDEX "turn_history_search";
CREATE INDEX "turn_history_search" ON "turns" USING gin ("search_tsv") WHERE "state" = 'completed';
CREATE INDEX "turn_history_recent" ON "turns" ("created_at" DESC) WHERE "state" = 'completed';
