-- history_search's full-text match over a room's finished turns, the
-- expression the tool's query uses (tools/history.go), so a search in a
-- room of 100,000 messages reads the index, not every turn.
CREATE INDEX "turn_history_search" ON "turns" USING gin (to_tsvector('simple', "input" || ' ' || coalesce("answer", ''))) WHERE "state" = 'completed';
