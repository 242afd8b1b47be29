-- create "model_calls" table
CREATE TABLE "model_calls" ("id" uuid NOT NULL, "created_at" timestamptz NOT NULL DEFAULT CURRENT_TIMESTAMP, "conversation_id" uuid NOT NULL, "attempt" bigint NOT NULL, "step" bigint NOT NULL, "purpose" character varying NOT NULL, "route" character varying NOT NULL, "request" jsonb NOT NULL, "response" jsonb NOT NULL, "input_tokens" bigint NOT NULL, "output_tokens" bigint NOT NULL, "duration_ms" bigint NOT NULL, "error" character varying NOT NULL DEFAULT '', "turn_id" uuid NOT NULL, PRIMARY KEY ("id"), CONSTRAINT "model_calls_turns_model_calls" FOREIGN KEY ("turn_id") REFERENCES "turns" ("id") ON UPDATE NO ACTION ON DELETE NO ACTION);
-- create index "modelcall_turn_id_attempt_step" to table: "model_calls"
CREATE UNIQUE INDEX "modelcall_turn_id_attempt_step" ON "model_calls" ("turn_id", "attempt", "step");
-- create "room_summaries" table
CREATE TABLE "room_summaries" ("id" uuid NOT NULL, "through_position" bigint NOT NULL, "summary" text NOT NULL, "turns" bigint NOT NULL DEFAULT 0, "turn_id" uuid NOT NULL, "updated_at" timestamptz NOT NULL DEFAULT CURRENT_TIMESTAMP, "conversation_id" uuid NOT NULL, PRIMARY KEY ("id"), CONSTRAINT "room_summaries_conversations_summary" FOREIGN KEY ("conversation_id") REFERENCES "conversations" ("id") ON UPDATE NO ACTION ON DELETE NO ACTION, CONSTRAINT "room_summaries_bounded" CHECK (octet_length(summary) <= 65536));
-- create index "room_summaries_conversation_id_key" to table: "room_summaries"
CREATE UNIQUE INDEX "room_summaries_conversation_id_key" ON "room_summaries" ("conversation_id");
