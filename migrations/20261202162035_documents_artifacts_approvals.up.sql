-- modify "turns" table
ALTER TABLE "turns" ADD COLUMN "specialist" character varying NULL;
-- create "approvals" table
CREATE TABLE "approvals" ("id" uuid NOT NULL, "created_at" timestamptz NOT NULL DEFAULT CURRENT_TIMESTAMP, "conversation_id" uuid NOT NULL, "call_id" character varying NOT NULL, "tool" character varying NOT NULL, "arguments" jsonb NOT NULL, "state" character varying NOT NULL DEFAULT 'pending', "decided_by" uuid NULL, "decided_at" timestamptz NULL, "expires_at" timestamptz NOT NULL, "executed_at" timestamptz NULL, "result" jsonb NULL, "turn_id" uuid NOT NULL, PRIMARY KEY ("id"), CONSTRAINT "approvals_turns_approvals" FOREIGN KEY ("turn_id") REFERENCES "turns" ("id") ON UPDATE NO ACTION ON DELETE NO ACTION, CONSTRAINT "approvals_decided_check" CHECK (((state)::text = 'pending'::text) = (decided_at IS NULL)), CONSTRAINT "approvals_executed_check" CHECK ((executed_at IS NULL) OR ((state)::text = 'approved'::text)));
-- create index "approval_turn_id_call_id" to table: "approvals"
CREATE UNIQUE INDEX "approval_turn_id_call_id" ON "approvals" ("turn_id", "call_id");
-- create "artifacts" table
CREATE TABLE "artifacts" ("id" uuid NOT NULL, "created_at" timestamptz NOT NULL DEFAULT CURRENT_TIMESTAMP, "turn_id" uuid NULL, "name" character varying NOT NULL, "media_type" character varying NOT NULL, "size" bigint NOT NULL, "sha256" character varying NOT NULL, "content" bytea NOT NULL, "owner_id" uuid NOT NULL, PRIMARY KEY ("id"), CONSTRAINT "artifacts_members_artifacts" FOREIGN KEY ("owner_id") REFERENCES "members" ("id") ON UPDATE NO ACTION ON DELETE NO ACTION, CONSTRAINT "artifacts_size_check" CHECK (size = octet_length(content)));
-- create "documents" table
CREATE TABLE "documents" ("id" uuid NOT NULL, "created_at" timestamptz NOT NULL DEFAULT CURRENT_TIMESTAMP, "title" character varying NOT NULL, "body" text NOT NULL, "digest" character varying NOT NULL, PRIMARY KEY ("id"));
-- create "document_acls" table
CREATE TABLE "document_acls" ("id" uuid NOT NULL, "principal" character varying NOT NULL, "document_id" uuid NOT NULL, PRIMARY KEY ("id"), CONSTRAINT "document_acls_documents_acl" FOREIGN KEY ("document_id") REFERENCES "documents" ("id") ON UPDATE NO ACTION ON DELETE NO ACTION, CONSTRAINT "document_acls_principal_lower" CHECK ((principal)::text = lower((principal)::text)));
-- create index "documentacl_document_id_principal" to table: "document_acls"
CREATE UNIQUE INDEX "documentacl_document_id_principal" ON "document_acls" ("document_id", "principal");
-- create index "documentacl_principal_document_id" to table: "document_acls"
CREATE INDEX "documentacl_principal_document_id" ON "document_acls" ("principal", "document_id");
-- create "member_agent_configs" table
CREATE TABLE "member_agent_configs" ("id" uuid NOT NULL, "created_at" timestamptz NOT NULL DEFAULT CURRENT_TIMESTAMP, "specialists" jsonb NULL, "agent_id" uuid NOT NULL, "member_id" uuid NOT NULL, PRIMARY KEY ("id"), CONSTRAINT "member_agent_configs_agents_member_configs" FOREIGN KEY ("agent_id") REFERENCES "agents" ("id") ON UPDATE NO ACTION ON DELETE NO ACTION, CONSTRAINT "member_agent_configs_members_agent_configs" FOREIGN KEY ("member_id") REFERENCES "members" ("id") ON UPDATE NO ACTION ON DELETE NO ACTION);
-- create index "memberagentconfig_member_id_agent_id" to table: "member_agent_configs"
CREATE UNIQUE INDEX "memberagentconfig_member_id_agent_id" ON "member_agent_configs" ("member_id", "agent_id");
-- create "passages" table
CREATE TABLE "passages" ("id" uuid NOT NULL, "ordinal" bigint NOT NULL, "text" text NOT NULL, "tsv" tsvector NULL, "document_id" uuid NOT NULL, PRIMARY KEY ("id"), CONSTRAINT "passages_documents_passages" FOREIGN KEY ("document_id") REFERENCES "documents" ("id") ON UPDATE NO ACTION ON DELETE NO ACTION);
-- create index "passage_document_id_ordinal" to table: "passages"
CREATE UNIQUE INDEX "passage_document_id_ordinal" ON "passages" ("document_id", "ordinal");
-- create index "passage_tsv" to table: "passages"
CREATE INDEX "passage_tsv" ON "passages" USING gin ("tsv");
-- create "room_resources" table
CREATE TABLE "room_resources" ("id" uuid NOT NULL, "created_at" timestamptz NOT NULL DEFAULT CURRENT_TIMESTAMP, "digest" character varying NOT NULL, "turn_id" uuid NULL, "artifact_id" uuid NOT NULL, "conversation_id" uuid NOT NULL, PRIMARY KEY ("id"), CONSTRAINT "room_resources_artifacts_references" FOREIGN KEY ("artifact_id") REFERENCES "artifacts" ("id") ON UPDATE NO ACTION ON DELETE NO ACTION, CONSTRAINT "room_resources_conversations_resources" FOREIGN KEY ("conversation_id") REFERENCES "conversations" ("id") ON UPDATE NO ACTION ON DELETE NO ACTION);
-- create index "roomresource_conversation_id_artifact_id" to table: "room_resources"
CREATE UNIQUE INDEX "roomresource_conversation_id_artifact_id" ON "room_resources" ("conversation_id", "artifact_id");
-- create "tasks" table
CREATE TABLE "tasks" ("id" uuid NOT NULL, "created_at" timestamptz NOT NULL DEFAULT CURRENT_TIMESTAMP, "conversation_id" uuid NULL, "title" character varying NOT NULL, "status" character varying NOT NULL DEFAULT 'open', "updated_at" timestamptz NOT NULL, "owner_id" uuid NOT NULL, PRIMARY KEY ("id"), CONSTRAINT "tasks_members_tasks" FOREIGN KEY ("owner_id") REFERENCES "members" ("id") ON UPDATE NO ACTION ON DELETE NO ACTION);
-- create index "task_owner_id_status" to table: "tasks"
CREATE INDEX "task_owner_id_status" ON "tasks" ("owner_id", "status");
