package turn

import (
	"context"
	"database/sql"

	"github.com/google/uuid"

	"github.com/turngate/turngate/journal"
)

// queryRow is QueryRowContext for a Querier: it scans the first row into
// dest, or returns sql.ErrNoRows.
func queryRow(ctx context.Context, q journal.Querier, query string, args []any, dest ...any) error {
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
	return rows.Close()
}

// queryIDs runs a query selecting one UUID column.
func queryIDs(ctx context.Context, q journal.Querier, query string, args ...any) ([]uuid.UUID, error) {
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
