// Package pg owns the database handle every storage package takes and the
// few helpers around it: Querier (a *sql.DB, a *sql.Tx, an *ent.Client or
// an *ent.Tx), QueryRow, QueryIDs, the classification of the Postgres
// errors a storage seam translates (IsUniqueViolation), and Open, the
// handle that sends each statement in one round trip (as a transaction
// pooler needs).
//
// It is a leaf: it imports the standard library and lib/pq only, and no
// package of this module. Domain errors are not made here; each storage
// seam turns these into its own (lease.ErrNotClaimable, errcode.NotFound).
//
// # What it must not import
//
// pg imports no package of this module, and outside the standard library
// only lib/pq and uuid.
package pg
