-- create "member_groups" table
CREATE TABLE "member_groups" ("id" uuid NOT NULL, "created_at" timestamptz NOT NULL DEFAULT CURRENT_TIMESTAMP, "name" character varying NOT NULL, "member_id" uuid NOT NULL, PRIMARY KEY ("id"), CONSTRAINT "member_groups_members_groups" FOREIGN KEY ("member_id") REFERENCES "members" ("id") ON UPDATE NO ACTION ON DELETE NO ACTION, CONSTRAINT "member_groups_name_form" CHECK ((name)::text ~ '^[a-z0-9][a-z0-9_.-]{0,63}$'::text));
-- create index "membergroup_member_id_name" to table: "member_groups"
CREATE UNIQUE INDEX "membergroup_member_id_name" ON "member_groups" ("member_id", "name");
-- create index "membergroup_name_member_id" to table: "member_groups"
CREATE INDEX "membergroup_name_member_id" ON "member_groups" ("name", "member_id");
