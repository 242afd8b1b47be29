//go:build ignore

// gen writes a new versioned migration when the ent schema has changed. It
// replays the existing files on a throwaway private Postgres (the dev
// database), diffs the result against ../ent/schema and writes the
// difference as golang-migrate files. Hand-written extras (triggers and the
// like) sit beside the generated files; the checksum file is rewritten
// first so they are accepted. Run through `make generate`.
package main

import (
	"context"
	"database/sql"
	"flag"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"ariga.io/atlas/sql/migrate"
	atlas "ariga.io/atlas/sql/schema"
	"ariga.io/atlas/sql/sqltool"
	"entgo.io/ent/dialect"
	"entgo.io/ent/dialect/sql/schema"
	_ "github.com/lib/pq"

	entmigrate "github.com/turngate/turngate/ent/migrate"
	"github.com/turngate/turngate/internal/pgembed"
)

func main() {
	name := flag.String("name", "schema", "name of the migration to write when the schema changed")
	devURL := flag.String("dev-url", "", "an empty dev database to replay on; default: a throwaway private Postgres")
	flag.Parse()
	if err := run(context.Background(), *name, *devURL); err != nil {
		log.Fatalf("migrations/gen: %v", err)
	}
}

func run(ctx context.Context, name, devURL string) error {
	if devURL == "" {
		tmp, err := os.MkdirTemp("", "turngate-migrate-dev-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(tmp)
		pg, err := pgembed.Start(ctx, pgembed.Options{Dir: tmp})
		if err != nil {
			return fmt.Errorf("start dev postgres: %w", err)
		}
		defer pg.Stop()
		db, err := sql.Open("postgres", pg.URL("postgres"))
		if err != nil {
			return err
		}
		if _, err := db.ExecContext(ctx, "CREATE DATABASE migrate_dev"); err != nil {
			db.Close()
			return fmt.Errorf("create dev database: %w", err)
		}
		db.Close()
		devURL = pg.URL("migrate_dev")
	}

	dirPath, err := filepath.Abs(".")
	if err != nil {
		return err
	}
	dir, err := sqltool.NewGolangMigrateDir(dirPath)
	if err != nil {
		return fmt.Errorf("open migration dir: %w", err)
	}
	sum, err := dir.Checksum()
	if err != nil {
		return fmt.Errorf("checksum migration dir: %w", err)
	}
	if err := migrate.WriteSumFile(dir, sum); err != nil {
		return fmt.Errorf("write atlas.sum: %w", err)
	}
	return entmigrate.NamedDiff(ctx, devURL, name,
		schema.WithDir(dir),
		schema.WithMigrationMode(schema.ModeReplay),
		schema.WithDialect(dialect.Postgres),
		schema.WithFormatter(sqltool.GolangMigrateFormatter),
		// The schema is the truth: what it no longer has is dropped.
		schema.WithDropIndex(true),
		schema.WithDropColumn(true),
		schema.WithDiffHook(keepHandWritten),
	)
}

// handWrittenIndexes are indexes the ent schema cannot express (over an
// expression, or over the id of a table whose primary key is not id
// alone), created by hand-written migrations: the diff keeps them.
var handWrittenIndexes = map[string]bool{
	"turn_history_search": true,
	"turn_history_recent": true,
	"turn_by_id":          true,
	"approval_by_id":      true,
	"command_by_id":       true,
}

// handWrittenColumns are columns only the database writes (by a trigger)
// and only raw SQL reads, created by hand-written migrations: the diff
// keeps them, and ent does not load them with every row.
var handWrittenColumns = map[string]bool{
	"turns.search_tsv": true,
}

// roomKeyed are the tables whose primary key is (conversation_id, id), set
// by a hand-written migration (ent's primary key is id alone), so that
// they can be distributed by room (docs/scaling.md): the diff keeps their
// primary keys.
var roomKeyed = map[string]bool{
	"approvals": true, "commands": true, "journal_entries": true, "model_calls": true,
	"room_members": true, "room_resources": true, "room_summaries": true, "turns": true,
	"turn_evidence": true,
}

// handWrittenForeignKeys pair the room's columns on both sides (ent's
// edges reference turns(id) alone): the diff keeps them.
var handWrittenForeignKeys = map[string]bool{
	"approvals_turns_approvals":       true,
	"commands_turns_commands":         true,
	"conversations_turns_active_turn": true,
	"journal_entries_turns_entries":   true,
	"model_calls_turns_model_calls":   true,
	"turn_evidence_turns_evidence":    true,
}

// handWritten reports whether a table change undoes a hand-written part
// of the schema.
func handWritten(table string, c atlas.Change) bool {
	switch c := c.(type) {
	case *atlas.DropIndex:
		return handWrittenIndexes[c.I.Name]
	case *atlas.DropColumn:
		return handWrittenColumns[table+"."+c.C.Name]
	case *atlas.AddPrimaryKey, *atlas.DropPrimaryKey, *atlas.ModifyPrimaryKey:
		return roomKeyed[table]
	case *atlas.AddForeignKey:
		return handWrittenForeignKeys[c.F.Symbol]
	case *atlas.DropForeignKey:
		return handWrittenForeignKeys[c.F.Symbol]
	case *atlas.ModifyForeignKey:
		return handWrittenForeignKeys[c.From.Symbol] || handWrittenForeignKeys[c.To.Symbol]
	}
	return false
}

// keepHandWritten removes from a diff the changes that would undo the
// hand-written parts of the schema.
func keepHandWritten(next schema.Differ) schema.Differ {
	return schema.DiffFunc(func(current, desired *atlas.Schema) ([]atlas.Change, error) {
		changes, err := next.Diff(current, desired)
		if err != nil {
			return nil, err
		}
		out := changes[:0]
		for _, c := range changes {
			if m, ok := c.(*atlas.ModifyTable); ok {
				kept := m.Changes[:0]
				for _, tc := range m.Changes {
					if handWritten(m.T.Name, tc) {
						continue
					}
					kept = append(kept, tc)
				}
				if m.Changes = kept; len(kept) == 0 {
					continue
				}
			}
			out = append(out, c)
		}
		return out, nil
	})
}
