-- modify "agent_versions" table
ALTER TABLE "agent_versions" ADD CONSTRAINT "agent_versions_lists" CHECK ((jsonb_typeof(tools) = 'array'::text) AND (jsonb_typeof(specialists) = 'array'::text) AND (jsonb_typeof(budgets) = 'object'::text)), ALTER COLUMN "tools" SET NOT NULL, ALTER COLUMN "specialists" SET NOT NULL, ALTER COLUMN "budgets" SET NOT NULL;
-- modify "member_agent_configs" table
ALTER TABLE "member_agent_configs" ADD CONSTRAINT "member_agent_configs_list" CHECK (jsonb_typeof(specialists) = 'array'::text), ALTER COLUMN "specialists" SET NOT NULL;
