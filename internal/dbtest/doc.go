// Package dbtest gives tests a fresh, migrated PostgreSQL database each.
//
// Each test binary that uses it starts ONE private server (package pgembed,
// non-durable settings, in a folder under os.TempDir() removed at the end),
// lazily, on the first call to [NewDB] or [OpenDB]. The schema is applied
// once, to a template database, by the [MigrateFunc] given to [Main]; every
// test then gets its own database cloned from that template (CREATE
// DATABASE ... TEMPLATE), dropped when the test ends. Tests may therefore
// run in parallel without seeing each other's writes.
//
// Wire it up in each package's TestMain:
//
//	func TestMain(m *testing.M) { os.Exit(dbtest.Main(m, migrations.Apply)) }
//
// If the environment variable TURNGATE_TEST_DATABASE_URL is set (a URL such
// as postgres://user@host:5432/postgres?sslmode=disable; the user must be
// allowed to create databases), that server is used instead and no server is
// started. The template and the clones are created there with unique names
// (turngate_tmpl_* and turngate_test_*), so several test binaries can share
// it; a test binary that crashes leaves them behind.
//
// For a benchmark that needs a durable server of its own, see [StartServer].
//
// # What it must not import
//
// dbtest imports internal/pgembed, and pg for the handle a replica opens
// (OpenDB opens its database as a replica does); it knows no schema (the
// MigrateFunc brings it) and no domain package.
package dbtest
