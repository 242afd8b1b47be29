package pg

import (
	"context"
	"database/sql"
	"errors"

	"github.com/google/uuid"
	"github.com/lib/pq"
)

// Querier is the database access a storage function needs: a *sql.DB, a
// *sql.Tx, an *ent.Client or an *ent.Tx.
type Querier interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// QueryRow is QueryRowContext for a Querier: it scans the first row of the
// query into dest, or returns sql.ErrNoRows.
func QueryRow(ctx context.Context, q Querier, query string, args []any, dest ...any) error {
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	if !rows.Next() {
		if err := rows.Err(); err != nil {
			return err
		}
		return sql.ErrNoRows
	}
	if err := rows.Scan(dest...); err != nil {
		return err
	}
	return CloseRows(rows)
}

// QueryIDs runs a query selecting one UUID column.
func QueryIDs(ctx context.Context, q Querier, query string, args ...any) ([]uuid.UUID, error) {
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var ids []uuid.UUID
	for rows.Next() {
		var id uuid.UUID
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		ids = append(ids, id)
	}
	return ids, rows.Err()
}

// CloseRows closes rows and reports the first error of the iteration or
// the close: a statement's error (a unique violation raised by a later
// row) may surface only there.
func CloseRows(rows *sql.Rows) error {
	if err := rows.Close(); err != nil {
		return err
	}
	return rows.Err()
}

// IsUniqueViolation reports a unique or exclusion index refusing a write
// (SQLSTATE 23505).
func IsUniqueViolation(err error) bool {
	var pqErr *pq.Error
	return errors.As(err, &pqErr) && pqErr.Code == "23505"
}

// IsTransient reports a transaction the database rolled back to break a
// deadlock (SQLSTATE 40P01) or a serialization conflict (40001): nothing
// of it was written, and running it again is safe.
func IsTransient(err error) bool {
	var pqErr *pq.Error
	return errors.As(err, &pqErr) && (pqErr.Code == "40P01" || pqErr.Code == "40001")
}
