-- create index "command_pending_by_turn" to table: "commands"
CREATE INDEX "command_pending_by_turn" ON "commands" ("turn_id") WHERE ((state)::text = 'pending'::text);
