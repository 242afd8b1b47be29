// Package resource owns the records a member's work leaves behind: the
// artifacts (immutable files a member owns, with their sha256), the room
// resource references that make an artifact part of a shared room at one
// digest, and the documents with their passages and ACLs.
//
// Every read re-authorises its viewer at the moment of the read, with the
// predicates of package authority embedded in its SQL: an artifact is
// readable by its owner and by the current members of a room that holds a
// reference to it; a document by the principals its ACL names now. One the
// viewer may not read is indistinguishable from one that does not exist
// (ErrArtifactNotFound). No artifact byte leaves ReadArtifact unless its
// sha256 matches the stored digest and every reference the viewer reads it
// through (ErrDigestMismatch).
//
// The package functions take a database handle so that callers can act
// inside their own transaction (linking at a tool's settlement or an
// invitation, a turn's acceptance checking its pinned artifacts); [Store]
// is the same reads as a service the API holds.
//
// tools adapts the store to the tool interface (create_artifact, run_code's
// inputs and outputs); graph and the download route read through a Store;
// room links on invitation; callback links when a tool settles.
//
// # What it must not import
//
// resource sits below every caller named above: it imports authority, pg
// and sandbox (for its file-name rule), never tools, turn, lease, runner,
// callback, room, graph or server.
package resource
