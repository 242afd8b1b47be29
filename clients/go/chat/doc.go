// Package chat is `turngate chat`: a terminal chat on the typed Go client
// (../client), with bubbletea for the interactive screen — the most used
// Go terminal UI framework, whose model/update/view loop fits a stream of
// journal entries and key presses — and a plain mode for scripts (Once).
//
// Interactive: a room picker (unless a room is given), then the room's
// live transcript with tool activity and citations. Enter sends a
// message, or steers the running turn when one of the member's runs;
// Ctrl-C stops the running turn, and a second Ctrl-C quits; an approval
// the member may decide is prompted (y/n). The owner of a shared room
// adds a member with /invite EMAIL (or /add) and is told how many earlier
// turns the newcomer reads withheld; a turn withheld from the member shows
// the server's notice in place of its answer. The connection state shows,
// and a dropped connection resumes without losing or repeating text (the
// client's room stream). An attempt a crash cut off shows as a dim line
// marked interrupted, above the answer the next attempt writes again.
//
// # What it must not import
//
// Only the public client and terminal libraries: no package of the
// server. It speaks to turngate over the contract like any other client.
package chat
