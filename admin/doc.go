// Package admin is the operator's surface: documents (add, replace,
// readers, delete), members (permissions and groups) and agents (agents,
// their immutable versions, members' roster configuration). Every
// operation first checks, in the database, that the caller holds its
// platform permission now (PermDocuments, PermMembers, PermAgents) —
// re-checked on every call like any other authorization rule — and a
// caller without it is FORBIDDEN with nothing changed.
//
// # Bounded by what the caller holds
//
// Whoever acts for others is bounded by what they hold themselves:
//
//   - a permission is granted or revoked only by a caller who holds
//     admin:members and that permission;
//   - a member's permissions and groups are changed only by a caller who
//     holds every admin permission that member holds (who holds less does
//     not act on who holds more);
//   - who is in a group is changed only by a caller who may read every
//     document whose readers name the group (the group gives nothing
//     beyond what the caller holds);
//   - a document is replaced, re-read or deleted only by a caller who may
//     read it now (authority's documents.read and ACL); adding one is not
//     bounded, the caller supplies it;
//   - the last holder of admin:members keeps it (CONFLICT).
//
// Each rule is decided in the change's own transaction, under row locks
// taken in one order (bound.go), so a concurrent change the rule depends
// on — the caller's own permission revoked, two holders revoking each
// other's admin:members — runs before or after it, never beside it.
//
// # The admin record
//
// Every change that changed something writes one admin_events row in its
// own transaction (record): who, the area (the permission it needed),
// the action, the subject and the arguments — never a document's body.
// A call that converged on what was already there, or was refused,
// writes none. Events lists it newest first, for the areas whose
// permission the reader holds now.
//
// # What it must not import
//
// graph (it is called by resolvers, not the other way round), and
// nothing that runs a turn (turn, runner, callback). Of the runtime it
// reads only the names of its controllers (runtime.Controllers), to refuse
// an agent version the runtime would not run. Its authorization rules are
// authority's predicates (Holds, MayReadDocuments, ReadableDocuments)
// applied to the admin's own acts.
package admin
