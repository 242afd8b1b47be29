-- modify "turns" table
ALTER TABLE "turns" ADD COLUMN "checkpoint" jsonb NULL, ADD COLUMN "usage" jsonb NULL;
