ALTER TABLE "approvals" DROP CONSTRAINT "approvals_turns_approvals";
ALTER TABLE "commands" DROP CONSTRAINT "commands_turns_commands";
ALTER TABLE "conversations" DROP CONSTRAINT "conversations_turns_active_turn";
ALTER TABLE "journal_entries" DROP CONSTRAINT "journal_entries_turns_entries";
ALTER TABLE "model_calls" DROP CONSTRAINT "model_calls_turns_model_calls";

DROP INDEX "turn_by_id";
DROP INDEX "approval_by_id";
DROP INDEX "command_by_id";

ALTER TABLE "turns" DROP CONSTRAINT "turns_pkey", ADD PRIMARY KEY ("id");
ALTER TABLE "journal_entries" DROP CONSTRAINT "journal_entries_pkey", ADD PRIMARY KEY ("id");
ALTER TABLE "commands" DROP CONSTRAINT "commands_pkey", ADD PRIMARY KEY ("id");
ALTER TABLE "approvals" DROP CONSTRAINT "approvals_pkey", ADD PRIMARY KEY ("id");
ALTER TABLE "model_calls" DROP CONSTRAINT "model_calls_pkey", ADD PRIMARY KEY ("id");
ALTER TABLE "room_members" DROP CONSTRAINT "room_members_pkey", ADD PRIMARY KEY ("id");
ALTER TABLE "room_resources" DROP CONSTRAINT "room_resources_pkey", ADD PRIMARY KEY ("id");
ALTER TABLE "room_summaries" DROP CONSTRAINT "room_summaries_pkey", ADD PRIMARY KEY ("id");

ALTER TABLE "approvals" ADD CONSTRAINT "approvals_turns_approvals" FOREIGN KEY ("turn_id") REFERENCES "turns" ("id") ON UPDATE NO ACTION ON DELETE NO ACTION;
ALTER TABLE "commands" ADD CONSTRAINT "commands_turns_commands" FOREIGN KEY ("turn_id") REFERENCES "turns" ("id") ON UPDATE NO ACTION ON DELETE NO ACTION;
ALTER TABLE "conversations" ADD CONSTRAINT "conversations_turns_active_turn" FOREIGN KEY ("active_turn_id") REFERENCES "turns" ("id") ON UPDATE NO ACTION ON DELETE SET NULL;
ALTER TABLE "journal_entries" ADD CONSTRAINT "journal_entries_turns_entries" FOREIGN KEY ("turn_id") REFERENCES "turns" ("id") ON UPDATE NO ACTION ON DELETE SET NULL;
ALTER TABLE "model_calls" ADD CONSTRAINT "model_calls_turns_model_calls" FOREIGN KEY ("turn_id") REFERENCES "turns" ("id") ON UPDATE NO ACTION ON DELETE NO ACTION;
