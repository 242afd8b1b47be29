-- reverse: create index "turnevidence_conversation_id_turn_id_document_id" to table: "turn_evidence"
DROP INDEX "turnevidence_conversation_id_turn_id_document_id";
-- reverse: create "turn_evidence" table
DROP TABLE "turn_evidence";
-- reverse: create index "adminevent_created_at" to table: "admin_events"
DROP INDEX "adminevent_created_at";
-- reverse: create index "adminevent_area_created_at" to table: "admin_events"
DROP INDEX "adminevent_area_created_at";
-- reverse: create "admin_events" table
DROP TABLE "admin_events";
-- reverse: modify "room_summaries" table
ALTER TABLE "room_summaries" DROP COLUMN "evidence", DROP COLUMN "audience_version";
