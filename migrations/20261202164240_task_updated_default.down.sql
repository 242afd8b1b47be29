-- reverse: modify "tasks" table
ALTER TABLE "tasks" ALTER COLUMN "updated_at" DROP DEFAULT;
