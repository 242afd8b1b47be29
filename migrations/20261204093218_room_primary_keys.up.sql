-- A room's own rows are keyed by the room first, so that they can be
-- distributed by conversation_id and co-located with their room (Citus,
-- docs/scaling.md): every primary key becomes (conversation_id, id), and
-- every foreign key to a turn pairs the rooms too. ent's primary keys and
-- edges say id alone; migrations/gen.go keeps these. Lookups by a turn,
-- approval or command id alone keep an index of their own.
--
-- The foreign keys to turns depend on turns_pkey: they go first.
ALTER TABLE "approvals" DROP CONSTRAINT "approvals_turns_approvals";
ALTER TABLE "commands" DROP CONSTRAINT "commands_turns_commands";
ALTER TABLE "conversations" DROP CONSTRAINT "conversations_turns_active_turn";
ALTER TABLE "journal_entries" DROP CONSTRAINT "journal_entries_turns_entries";
ALTER TABLE "model_calls" DROP CONSTRAINT "model_calls_turns_model_calls";

ALTER TABLE "turns" DROP CONSTRAINT "turns_pkey", ADD PRIMARY KEY ("conversation_id", "id");
ALTER TABLE "journal_entries" DROP CONSTRAINT "journal_entries_pkey", ADD PRIMARY KEY ("conversation_id", "id");
ALTER TABLE "commands" DROP CONSTRAINT "commands_pkey", ADD PRIMARY KEY ("conversation_id", "id");
ALTER TABLE "approvals" DROP CONSTRAINT "approvals_pkey", ADD PRIMARY KEY ("conversation_id", "id");
ALTER TABLE "model_calls" DROP CONSTRAINT "model_calls_pkey", ADD PRIMARY KEY ("conversation_id", "id");
ALTER TABLE "room_members" DROP CONSTRAINT "room_members_pkey", ADD PRIMARY KEY ("conversation_id", "id");
ALTER TABLE "room_resources" DROP CONSTRAINT "room_resources_pkey", ADD PRIMARY KEY ("conversation_id", "id");
ALTER TABLE "room_summaries" DROP CONSTRAINT "room_summaries_pkey", ADD PRIMARY KEY ("conversation_id", "id");

CREATE INDEX "turn_by_id" ON "turns" ("id");
CREATE INDEX "approval_by_id" ON "approvals" ("id");
CREATE INDEX "command_by_id" ON "commands" ("id");

ALTER TABLE "approvals" ADD CONSTRAINT "approvals_turns_approvals" FOREIGN KEY ("conversation_id", "turn_id") REFERENCES "turns" ("conversation_id", "id") ON UPDATE NO ACTION ON DELETE NO ACTION;
ALTER TABLE "commands" ADD CONSTRAINT "commands_turns_commands" FOREIGN KEY ("conversation_id", "turn_id") REFERENCES "turns" ("conversation_id", "id") ON UPDATE NO ACTION ON DELETE NO ACTION;
ALTER TABLE "conversations" ADD CONSTRAINT "conversations_turns_active_turn" FOREIGN KEY ("id", "active_turn_id") REFERENCES "turns" ("conversation_id", "id") ON UPDATE NO ACTION ON DELETE SET NULL ("active_turn_id");
ALTER TABLE "journal_entries" ADD CONSTRAINT "journal_entries_turns_entries" FOREIGN KEY ("conversation_id", "turn_id") REFERENCES "turns" ("conversation_id", "id") ON UPDATE NO ACTION ON DELETE SET NULL ("turn_id");
ALTER TABLE "model_calls" ADD CONSTRAINT "model_calls_turns_model_calls" FOREIGN KEY ("conversation_id", "turn_id") REFERENCES "turns" ("conversation_id", "id") ON UPDATE NO ACTION ON DELETE NO ACTION;
