// Package migrations holds turngate's versioned SQL schema and applies it.
//
// The *.up.sql files are generated from ../ent/schema by gen.go (`make
// generate`), plus hand-written extras for what ent cannot say (triggers).
// They are embedded in the binary and applied at start-up and by `turngate
// migrate`; tests build their databases from the same files, so tests run
// the production schema.
//
// # What it must not import
//
// migrations imports no package of this module: the schema is SQL, and
// gen.go (a generator, not part of the package) reads ent/schema.
package migrations
