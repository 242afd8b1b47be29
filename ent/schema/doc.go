// Package schema holds the ent schema of every table: fields, edges and
// indexes, from which `make generate` writes the ent client and the
// migrations' DDL. It is the data model of DESIGN.md §4 in code.
//
// # What it must not import
//
// schema imports only entgo.io packages, github.com/google/uuid (the
// ids' type) and the standard library.
package schema
