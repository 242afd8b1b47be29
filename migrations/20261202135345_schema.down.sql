-- reverse: modify "turns" table
ALTER TABLE "turns" DROP CONSTRAINT "turns_members_turns", DROP CONSTRAINT "turns_conversations_turns";
-- reverse: modify "room_members" table
ALTER TABLE "room_members" DROP CONSTRAINT "room_members_members_rooms", DROP CONSTRAINT "room_members_conversations_members";
-- reverse: modify "member_permissions" table
ALTER TABLE "member_permissions" DROP CONSTRAINT "member_permissions_members_permissions";
-- reverse: modify "journal_entries" table
ALTER TABLE "journal_entries" DROP CONSTRAINT "journal_entries_turns_entries", DROP CONSTRAINT "journal_entries_conversations_entries";
-- reverse: modify "conversations" table
ALTER TABLE "conversations" DROP CONSTRAINT "conversations_turns_active_turn", DROP CONSTRAINT "conversations_members_owned_conversations", DROP CONSTRAINT "conversations_agents_agent";
-- reverse: modify "commands" table
ALTER TABLE "commands" DROP CONSTRAINT "commands_turns_commands";
-- reverse: modify "agent_versions" table
ALTER TABLE "agent_versions" DROP CONSTRAINT "agent_versions_agents_versions";
-- reverse: create index "turn_state_lease_expires_at" to table: "turns"
DROP INDEX "turn_state_lease_expires_at";
-- reverse: create index "turn_one_running_per_room" to table: "turns"
DROP INDEX "turn_one_running_per_room";
-- reverse: create index "turn_conversation_id_position" to table: "turns"
DROP INDEX "turn_conversation_id_position";
-- reverse: create index "turn_conversation_id_author_id_idempotency_key" to table: "turns"
DROP INDEX "turn_conversation_id_author_id_idempotency_key";
-- reverse: create "turns" table
DROP TABLE "turns";
-- reverse: create index "roommember_member_id" to table: "room_members"
DROP INDEX "roommember_member_id";
-- reverse: create index "roommember_conversation_id_member_id" to table: "room_members"
DROP INDEX "roommember_conversation_id_member_id";
-- reverse: create "room_members" table
DROP TABLE "room_members";
-- reverse: create index "memberpermission_member_id_permission" to table: "member_permissions"
DROP INDEX "memberpermission_member_id_permission";
-- reverse: create "member_permissions" table
DROP TABLE "member_permissions";
-- reverse: create index "members_platform_user_id_key" to table: "members"
DROP INDEX "members_platform_user_id_key";
-- reverse: create index "members_email_key" to table: "members"
DROP INDEX "members_email_key";
-- reverse: create "members" table
DROP TABLE "members";
-- reverse: create index "journalentry_turn_id_seq" to table: "journal_entries"
DROP INDEX "journalentry_turn_id_seq";
-- reverse: create index "journalentry_conversation_id_seq" to table: "journal_entries"
DROP INDEX "journalentry_conversation_id_seq";
-- reverse: create index "journal_entry_one_terminal_per_turn" to table: "journal_entries"
DROP INDEX "journal_entry_one_terminal_per_turn";
-- reverse: create "journal_entries" table
DROP TABLE "journal_entries";
-- reverse: create index "conversations_public_key_key" to table: "conversations"
DROP INDEX "conversations_public_key_key";
-- reverse: create index "conversations_channel_key" to table: "conversations"
DROP INDEX "conversations_channel_key";
-- reverse: create "conversations" table
DROP TABLE "conversations";
-- reverse: create "commands" table
DROP TABLE "commands";
-- reverse: create index "agentversion_agent_id_version" to table: "agent_versions"
DROP INDEX "agentversion_agent_id_version";
-- reverse: create "agent_versions" table
DROP TABLE "agent_versions";
-- reverse: create index "agents_slug_key" to table: "agents"
DROP INDEX "agents_slug_key";
-- reverse: create "agents" table
DROP TABLE "agents";
