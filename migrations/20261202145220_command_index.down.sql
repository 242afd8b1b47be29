-- reverse: create index "command_pending_by_turn" to table: "commands"
DROP INDEX "command_pending_by_turn";
