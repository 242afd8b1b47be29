// Package ent is the data model's generated client (entgo.io/ent), from
// the schema in ent/schema; ent/entc.go drives `make generate`. Every
// file here but this one and entc.go is generated and never edited by
// hand. The invariants the code relies on — unique keys, partial unique
// indexes, the append-only journal and immutable artifacts — are the
// migrations' (migrations/), not the generated client's.
//
// # What it must not import
//
// ent imports only its own sub-packages and the schema; nothing of
// turngate's above it.
package ent
