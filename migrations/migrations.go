package migrations

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"strconv"
	"strings"

	"github.com/golang-migrate/migrate/v4"
	"github.com/golang-migrate/migrate/v4/database/postgres"
	"github.com/golang-migrate/migrate/v4/source/iofs"
	_ "github.com/lib/pq" // the Postgres driver
)

//go:embed *.sql
var files embed.FS

// ErrNewerSchema reports a database migrated by a newer turngate than this
// binary: running against it could corrupt data the binary does not know.
var ErrNewerSchema = errors.New("database schema is newer than this binary")

// Latest is the newest schema version this binary knows.
func Latest() (uint, error) {
	entries, err := fs.ReadDir(files, ".")
	if err != nil {
		return 0, err
	}
	var latest uint
	for _, e := range entries {
		head, _, ok := strings.Cut(e.Name(), "_")
		if !ok || !strings.HasSuffix(e.Name(), ".up.sql") {
			continue
		}
		v, err := strconv.ParseUint(head, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("migration %s: bad version: %w", e.Name(), err)
		}
		latest = max(latest, uint(v))
	}
	return latest, nil
}

// Apply brings the database at url to the latest version. It refuses a
// database whose version is newer than Latest, and one left dirty by a
// failed migration.
func Apply(ctx context.Context, url string) error {
	db, err := sql.Open("postgres", url)
	if err != nil {
		return fmt.Errorf("open database: %w", err)
	}
	defer db.Close()
	return ApplyDB(ctx, db)
}

// ApplyDB is Apply on an open database handle.
func ApplyDB(ctx context.Context, db *sql.DB) error {
	latest, err := Latest()
	if err != nil {
		return err
	}
	conn, err := db.Conn(ctx)
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	driver, err := postgres.WithConnection(ctx, conn, &postgres.Config{})
	if err != nil {
		conn.Close()
		return fmt.Errorf("migration driver: %w", err)
	}
	defer driver.Close()
	src, err := iofs.New(files, ".")
	if err != nil {
		return fmt.Errorf("migration source: %w", err)
	}
	m, err := migrate.NewWithInstance("iofs", src, "postgres", driver)
	if err != nil {
		return fmt.Errorf("migrator: %w", err)
	}
	current, dirty, err := m.Version()
	switch {
	case errors.Is(err, migrate.ErrNilVersion):
	case err != nil:
		return fmt.Errorf("read schema version: %w", err)
	case current > latest:
		return fmt.Errorf("%w: the database is at version %d, this binary knows up to %d; run a newer turngate", ErrNewerSchema, current, latest)
	case dirty:
		return fmt.Errorf("database schema is dirty at version %d: a migration failed half-way; repair it by hand", current)
	}
	if err := m.Up(); err != nil && !errors.Is(err, migrate.ErrNoChange) {
		return fmt.Errorf("apply migrations: %w", err)
	}
	return nil
}

// Applied is the schema version the database is at (golang-migrate's
// schema_migrations). A database left dirty by a failed migration is an
// error: it is at no version.
func Applied(ctx context.Context, db *sql.DB) (uint, error) {
	var v int64
	var dirty bool
	if err := db.QueryRowContext(ctx, `SELECT version, dirty FROM schema_migrations LIMIT 1`).Scan(&v, &dirty); err != nil {
		return 0, fmt.Errorf("schema version: %w", err)
	}
	if dirty {
		return 0, fmt.Errorf("schema version %d is dirty: a migration failed", v)
	}
	return uint(v), nil
}
