-- reverse: modify "turns" table
ALTER TABLE "turns" DROP COLUMN "trace_parent";
