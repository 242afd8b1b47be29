-- reverse: create index "turn_running_lease_expiry" to table: "turns"
DROP INDEX "turn_running_lease_expiry";
-- reverse: drop index "turn_state_lease_expires_at" from table: "turns"
CREATE INDEX "turn_state_lease_expires_at" ON "turns" ("state", "lease_expires_at");
