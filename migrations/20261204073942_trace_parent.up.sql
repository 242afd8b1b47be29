-- modify "turns" table
ALTER TABLE "turns" ADD COLUMN "trace_parent" character varying NULL;
