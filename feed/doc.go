// Package feed owns what one viewer may read of a room: the journal and its
// streams, a turn's answer, citations, artifacts, approvals and replay, each
// as that viewer may read it now. Resolvers call it and never decide this
// themselves; it is the one place the rule is written.
//
// # The rule
//
// Every viewer reads only what derives from evidence they may read now,
// whenever they joined. A turn's evidence is every document its text may
// derive from (turn_evidence: what its tools returned, what it was given
// as input, and the evidence of the turns whose text it was given as
// history, room summary or search hit). A turn is withheld from a viewer
// when they may not read every document of its evidence now — a member
// added after the turn ran, a member who lost a document's ACL or left a
// reader group since — and from everyone when its answer was withheld
// from the room's audience at publication (outcome.ReasonAudienceWithheld).
//
// A withheld turn keeps its place: every entry keeps its position, so a
// reader resuming from a position neither skips nor repeats one. What the
// viewer reads of it:
//
//   - answer_delta: the text is empty (the offset stays);
//   - tool_requested and approval_requested: the arguments are "{}";
//   - turn_answer: the text is outcome.WithheldAnswer, no artifacts, and only
//     the citations of documents the viewer may read;
//   - turn_terminal of a completed turn: reason audience_withheld, the
//     notice every client already shows for an answer the room may not
//     read;
//   - the turn itself (answer, terminal reason, artifacts, approvals'
//     arguments) and its replay (no text at all) alike.
//
// Entries of turns the viewer may read are shown as stored, except that a
// turn_answer's and a tool_completed's citations of documents the viewer
// may not read are dropped (defence in depth: the turn's tools read only
// what its audience could).
//
// # Views
//
// What a set of a room's turns and documents look like to its members is a
// view, computed in one statement at one moment: each turn's evidence, the
// turns withheld from the whole audience, and for each member the
// documents they may not read. The room's shared tail (journal) computes
// one view per batch it reads, for every current member, and keeps it with
// the batch's entries (journal.Entry.View), so ten thousand followers of a
// room cost one statement per batch, not one each. A follower uses a
// batch's view only when it was computed after the follower started and
// for the follower as a member; otherwise — entries the tail held before
// the follower subscribed — it computes the view of those turns for
// itself, now. A page (the journal query) and a turn read compute theirs
// for the one viewer, now.
//
// # What it must not import
//
// graph (the resolvers call feed, not the other way round), lease (the
// terminal reasons it reads are outcome's), gateway, runtime, runner,
// callback, tools.
package feed
