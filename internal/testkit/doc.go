// Package testkit builds the world a data test needs on a real Postgres: a
// database of its own cloned from the migrated template (internal/dbtest),
// the services wired as the server wires them, and the demo data set.
//
// # What it must not import
//
// testkit is for tests only: no production package imports it, and it
// imports no test package. It wires the services as server/ does, without
// importing server.
package testkit
