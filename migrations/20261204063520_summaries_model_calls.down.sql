-- reverse: create index "room_summaries_conversation_id_key" to table: "room_summaries"
DROP INDEX "room_summaries_conversation_id_key";
-- reverse: create "room_summaries" table
DROP TABLE "room_summaries";
-- reverse: create index "modelcall_turn_id_attempt_step" to table: "model_calls"
DROP INDEX "modelcall_turn_id_attempt_step";
-- reverse: create "model_calls" table
DROP TABLE "model_calls";
