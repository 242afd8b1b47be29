package migrations_test

import (
	"context"
	"database/sql"
	"errors"
	"os"
	"testing"

	"github.com/turngate/turngate/internal/dbtest"
	"github.com/turngate/turngate/migrations"
)

func TestMain(m *testing.M) { os.Exit(dbtest.Main(m, migrations.Apply)) }

// TestApplyIsIdempotent: applying to a database already at the latest
// version changes nothing and succeeds.
func TestApplyIsIdempotent(t *testing.T) {
	t.Parallel()
	db, url := dbtest.OpenDB(t)
	if err := migrations.Apply(context.Background(), url); err != nil {
		t.Fatalf("second apply: %v", err)
	}
	latest, err := migrations.Latest()
	if err != nil {
		t.Fatal(err)
	}
	if got := version(t, db); got != int64(latest) {
		t.Fatalf("schema version %d, want %d", got, latest)
	}
}

// TestNewerSchemaRefused: a database migrated by a newer binary is refused
// with ErrNewerSchema, and left as it was.
func TestNewerSchemaRefused(t *testing.T) {
	t.Parallel()
	db, url := dbtest.OpenDB(t)
	latest, err := migrations.Latest()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`UPDATE schema_migrations SET version = $1`, int64(latest)+1); err != nil {
		t.Fatal(err)
	}
	err = migrations.Apply(context.Background(), url)
	if !errors.Is(err, migrations.ErrNewerSchema) {
		t.Fatalf("apply to a newer database: err = %v, want ErrNewerSchema", err)
	}
	if got := version(t, db); got != int64(latest)+1 {
		t.Fatalf("schema version changed to %d", got)
	}
}

// TestFreshDatabaseMigrates: an empty database gets the whole schema.
func TestFreshDatabaseMigrates(t *testing.T) {
	t.Parallel()
	db, url := dbtest.OpenDB(t)
	ctx := context.Background()
	if _, err := db.Exec(`CREATE DATABASE turngate_fresh_migrate`); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Exec(`DROP DATABASE turngate_fresh_migrate WITH (FORCE)`) })
	fresh := replaceDB(t, url, "turngate_fresh_migrate")
	if err := migrations.Apply(ctx, fresh); err != nil {
		t.Fatal(err)
	}
	fdb, err := sql.Open("postgres", fresh)
	if err != nil {
		t.Fatal(err)
	}
	defer fdb.Close()
	var n int
	if err := fdb.QueryRow(`SELECT count(*) FROM information_schema.tables WHERE table_name IN ('turns', 'journal_entries', 'conversations', 'members')`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 4 {
		t.Fatalf("%d of 4 core tables exist after migrating", n)
	}
}

func version(t *testing.T, db *sql.DB) int64 {
	t.Helper()
	var v int64
	if err := db.QueryRow(`SELECT version FROM schema_migrations`).Scan(&v); err != nil {
		t.Fatal(err)
	}
	return v
}
