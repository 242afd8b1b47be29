DROP INDEX "turn_history_search";
