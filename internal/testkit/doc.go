// Package testkit builds the world a data test needs on a real Postgres: a
// database of its own cloned from the migrated template (internal/dbtest),
// the services wired as the server wires them, and the demo data set.
// Besides, what the tests of a run share across turn/, runner/,
// callback/ and lease/: model providers a test scripts (ScriptModel) or
// holds mid-answer (GatedModel), reads of a turn's journal entries,
// usage and the room's kept summary, a direct claim of a lane's head,
// and a specialist roster.
//
// # What it must not import
//
// testkit is for tests only: no production package imports it, and it
// imports no test package. It wires the services as server/ does, without
// importing server.
package testkit
