-- reverse: create index "modelcall_conversation_id_turn_id_attempt_step" to table: "model_calls"
DROP INDEX "modelcall_conversation_id_turn_id_attempt_step";
-- reverse: drop index "modelcall_turn_id_attempt_step" from table: "model_calls"
CREATE UNIQUE INDEX "modelcall_turn_id_attempt_step" ON "model_calls" ("turn_id", "attempt", "step");
-- reverse: create index "journal_entry_one_terminal_per_turn" to table: "journal_entries"
DROP INDEX "journal_entry_one_terminal_per_turn";
-- reverse: drop index "journal_entry_one_terminal_per_turn" from table: "journal_entries"
CREATE UNIQUE INDEX "journal_entry_one_terminal_per_turn" ON "journal_entries" ("turn_id") WHERE ((kind)::text = 'turn_terminal'::text);
-- reverse: create index "approval_conversation_id_turn_id_call_id" to table: "approvals"
DROP INDEX "approval_conversation_id_turn_id_call_id";
-- reverse: drop index "approval_turn_id_call_id" from table: "approvals"
CREATE UNIQUE INDEX "approval_turn_id_call_id" ON "approvals" ("turn_id", "call_id");
