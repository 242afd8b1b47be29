-- reverse: modify "member_agent_configs" table
ALTER TABLE "member_agent_configs" ALTER COLUMN "specialists" DROP NOT NULL, DROP CONSTRAINT "member_agent_configs_list";
-- reverse: modify "agent_versions" table
ALTER TABLE "agent_versions" ALTER COLUMN "budgets" DROP NOT NULL, ALTER COLUMN "specialists" DROP NOT NULL, ALTER COLUMN "tools" DROP NOT NULL, DROP CONSTRAINT "agent_versions_lists";
