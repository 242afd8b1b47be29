-- modify "approvals" table
ALTER TABLE "approvals" ADD COLUMN "execution_lease" bigint NULL;
