-- drop index "turn_state_lease_expires_at" from table: "turns"
DROP INDEX "turn_state_lease_expires_at";
-- create index "turn_running_lease_expiry" to table: "turns"
CREATE INDEX "turn_running_lease_expiry" ON "turns" ("lease_expires_at") WHERE ((state)::text = 'running'::text);
