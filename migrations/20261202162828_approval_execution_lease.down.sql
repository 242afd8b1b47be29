-- reverse: modify "approvals" table
ALTER TABLE "approvals" DROP COLUMN "execution_lease";
