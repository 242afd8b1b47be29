-- drop index "approval_turn_id_call_id" from table: "approvals"
DROP INDEX "approval_turn_id_call_id";
-- create index "approval_conversation_id_turn_id_call_id" to table: "approvals"
CREATE UNIQUE INDEX "approval_conversation_id_turn_id_call_id" ON "approvals" ("conversation_id", "turn_id", "call_id");
-- drop index "journal_entry_one_terminal_per_turn" from table: "journal_entries"
DROP INDEX "journal_entry_one_terminal_per_turn";
-- create index "journal_entry_one_terminal_per_turn" to table: "journal_entries"
CREATE UNIQUE INDEX "journal_entry_one_terminal_per_turn" ON "journal_entries" ("conversation_id", "turn_id") WHERE ((kind)::text = 'turn_terminal'::text);
-- drop index "modelcall_turn_id_attempt_step" from table: "model_calls"
DROP INDEX "modelcall_turn_id_attempt_step";
-- create index "modelcall_conversation_id_turn_id_attempt_step" to table: "model_calls"
CREATE UNIQUE INDEX "modelcall_conversation_id_turn_id_attempt_step" ON "model_calls" ("conversation_id", "turn_id", "attempt", "step");
