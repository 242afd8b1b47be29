DROP INDEX "turn_history_recent";
DROP INDEX "turn_history_search";
DROP TRIGGER turns_search_tsv ON turns;
DROP FUNCTION turngate_turn_search_tsv();
ALTER TABLE "turns" DROP COLUMN "search_tsv";
CREATE INDEX "turn_history_search" ON "turns" USING gin (to_tsvector('simple', "input" || ' ' || coalesce("answer", ''))) WHERE "state" = 'completed';
