-- turn_evidence is a room's own rows: keyed by the room first, like the
-- others (20261204093218_room_primary_keys), with its foreign key to the
-- turn pairing the rooms. migrations/gen.go keeps both.
ALTER TABLE "turn_evidence" DROP CONSTRAINT "turn_evidence_pkey", ADD PRIMARY KEY ("conversation_id", "id");
ALTER TABLE "turn_evidence" ADD CONSTRAINT "turn_evidence_turns_evidence" FOREIGN KEY ("conversation_id", "turn_id") REFERENCES "turns" ("conversation_id", "id") ON UPDATE NO ACTION ON DELETE CASCADE;

-- An agent version written without a list stored JSON null, and a
-- member's submission then failed reading its roster. Stored admin data is
-- normalised: every list is an array, the budgets an object (the checks
-- of the next migration keep it so).
-- Versions are immutable (agent_versions_immutable): the trigger is off
-- for this one rewrite of what a null always meant.
ALTER TABLE "agent_versions" DISABLE TRIGGER "agent_versions_immutable";
UPDATE "agent_versions" SET "specialists" = '[]' WHERE "specialists" IS NULL OR jsonb_typeof("specialists") <> 'array';
UPDATE "agent_versions" SET "tools" = '[]' WHERE "tools" IS NULL OR jsonb_typeof("tools") <> 'array';
UPDATE "agent_versions" SET "budgets" = '{}' WHERE "budgets" IS NULL OR jsonb_typeof("budgets") <> 'object';
ALTER TABLE "agent_versions" ENABLE TRIGGER "agent_versions_immutable";
UPDATE "member_agent_configs" SET "specialists" = '[]' WHERE "specialists" IS NULL OR jsonb_typeof("specialists") <> 'array';
