// Package admin is the operator's surface: documents (add, replace,
// readers, delete), members (permissions and groups) and agents (agents,
// their immutable versions, members' roster configuration). Every
// operation first checks, in the database, that the caller holds its
// platform permission now (PermDocuments, PermMembers, PermAgents) —
// re-checked on every call like any other authorization rule — and a
// caller without it is FORBIDDEN with nothing changed.
//
// # What it must not import
//
// graph (it is called by resolvers, not the other way round) and the
// runtime; it owns no authorization rule of its own beyond "holds the
// permission" (authority.Holds).
package admin
