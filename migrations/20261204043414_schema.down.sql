-- reverse: create index "membergroup_name_member_id" to table: "member_groups"
DROP INDEX "membergroup_name_member_id";
-- reverse: create index "membergroup_member_id_name" to table: "member_groups"
DROP INDEX "membergroup_member_id_name";
-- reverse: create "member_groups" table
DROP TABLE "member_groups";
