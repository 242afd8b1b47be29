-- reverse: modify "turns" table
ALTER TABLE "turns" DROP COLUMN "usage", DROP COLUMN "checkpoint";
