-- reverse: create index "task_owner_id_status" to table: "tasks"
DROP INDEX "task_owner_id_status";
-- reverse: create "tasks" table
DROP TABLE "tasks";
-- reverse: create index "roomresource_conversation_id_artifact_id" to table: "room_resources"
DROP INDEX "roomresource_conversation_id_artifact_id";
-- reverse: create "room_resources" table
DROP TABLE "room_resources";
-- reverse: create index "passage_tsv" to table: "passages"
DROP INDEX "passage_tsv";
-- reverse: create index "passage_document_id_ordinal" to table: "passages"
DROP INDEX "passage_document_id_ordinal";
-- reverse: create "passages" table
DROP TABLE "passages";
-- reverse: create index "memberagentconfig_member_id_agent_id" to table: "member_agent_configs"
DROP INDEX "memberagentconfig_member_id_agent_id";
-- reverse: create "member_agent_configs" table
DROP TABLE "member_agent_configs";
-- reverse: create index "documentacl_principal_document_id" to table: "document_acls"
DROP INDEX "documentacl_principal_document_id";
-- reverse: create index "documentacl_document_id_principal" to table: "document_acls"
DROP INDEX "documentacl_document_id_principal";
-- reverse: create "document_acls" table
DROP TABLE "document_acls";
-- reverse: create "documents" table
DROP TABLE "documents";
-- reverse: create "artifacts" table
DROP TABLE "artifacts";
-- reverse: create index "approval_turn_id_call_id" to table: "approvals"
DROP INDEX "approval_turn_id_call_id";
-- reverse: create "approvals" table
DROP TABLE "approvals";
-- reverse: modify "turns" table
ALTER TABLE "turns" DROP COLUMN "specialist";
