// Package room owns conversations (rooms) and their membership. Adding or
// removing a member bumps the room's audience version and appends
// member_joined / member_left in the same transaction, under the room's row
// lock, so a submission and a membership change are strictly ordered.
//
// It owns the conversations table's rows, the room_members rows and the
// scope forms a room is named by (through authority.Resolve). Invitation
// reconciles the room's resources (resource.LinkToRoom) in the same
// transaction. Whether someone is a member is authority's rule
// (authority.IsMember); room applies it, it does not restate it.
//
// # What it must not import
//
// room imports authority, journal, lease (a removal ends the removed
// member's turns through lease.Store.Revoke), resource, ent, errcode and
// metrics; never turn, runner, callback, tools, graph or server.
package room
