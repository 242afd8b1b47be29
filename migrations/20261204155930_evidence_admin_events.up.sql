-- modify "room_summaries" table
ALTER TABLE "room_summaries" ADD COLUMN "audience_version" bigint NOT NULL DEFAULT 0, ADD COLUMN "evidence" jsonb NULL;
-- create "admin_events" table
CREATE TABLE "admin_events" ("id" uuid NOT NULL, "created_at" timestamptz NOT NULL DEFAULT CURRENT_TIMESTAMP, "actor_id" uuid NOT NULL, "area" character varying NOT NULL, "action" character varying NOT NULL, "subject" character varying NOT NULL, "detail" jsonb NULL, PRIMARY KEY ("id"));
-- create index "adminevent_area_created_at" to table: "admin_events"
CREATE INDEX "adminevent_area_created_at" ON "admin_events" ("area", "created_at");
-- create index "adminevent_created_at" to table: "admin_events"
CREATE INDEX "adminevent_created_at" ON "admin_events" ("created_at");
-- create "turn_evidence" table
CREATE TABLE "turn_evidence" ("id" uuid NOT NULL, "created_at" timestamptz NOT NULL DEFAULT CURRENT_TIMESTAMP, "conversation_id" uuid NOT NULL, "turn_id" uuid NOT NULL, "document_id" uuid NOT NULL, PRIMARY KEY ("id"));
-- create index "turnevidence_conversation_id_turn_id_document_id" to table: "turn_evidence"
CREATE UNIQUE INDEX "turnevidence_conversation_id_turn_id_document_id" ON "turn_evidence" ("conversation_id", "turn_id", "document_id");
