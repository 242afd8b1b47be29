package pg

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"encoding/json"
	"fmt"

	"github.com/lib/pq"
)

// Open opens the database at dsn with every statement sent in one
// exchange with the server.
//
// lib/pq sends a statement with parameters as two exchanges by default
// (Parse and Describe, then Bind and Execute, each ending in Sync): two
// round trips for every statement a turn makes, where one does. Behind a
// pooler in transaction pooling mode (PgBouncer's pool_mode =
// transaction) the second exchange may even reach another server
// connection, which knows no such statement. Open sets lib/pq's
// binary_parameters, which sends the whole statement in one exchange. In
// that mode lib/pq sends []byte parameters in binary format, which is
// right for bytea and wrong for jsonb (whose binary format starts with a
// version byte): JSON values (json.RawMessage, as ent passes JSON fields)
// are sent as text instead.
//
// Behind a transaction pooler, callers must not prepare named statements
// outside a transaction (the pooler does not carry them across server
// connections), and must not rely on session state: LISTEN, session
// advisory locks and SET belong on a direct connection.
func Open(dsn string) (*sql.DB, error) {
	cfg, err := pq.NewConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("database URL: %w", err)
	}
	cfg.BinaryParameters = true
	c, err := pq.NewConnectorConfig(cfg)
	if err != nil {
		return nil, err
	}
	return sql.OpenDB(pooledConnector{c}), nil
}

type pooledConnector struct{ c *pq.Connector }

func (p pooledConnector) Connect(ctx context.Context) (driver.Conn, error) {
	c, err := p.c.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &pooledConn{c}, nil
}

func (p pooledConnector) Driver() driver.Driver { return p.c.Driver() }

// pooledConn is lib/pq's connection with JSON parameters sent as text.
// It forwards every optional interface lib/pq's connection implements.
type pooledConn struct{ driver.Conn }

// lib/pq's connection implements these; pooledConn forwards them.
type pqConn interface {
	driver.Conn
	driver.ConnBeginTx
	driver.ConnPrepareContext
	driver.QueryerContext
	driver.ExecerContext
	driver.Pinger
	driver.SessionResetter
	driver.Validator
	driver.NamedValueChecker
}

var _ pqConn = (*pooledConn)(nil)

func (c *pooledConn) pq() pqConn { return c.Conn.(pqConn) }

func (c *pooledConn) CheckNamedValue(nv *driver.NamedValue) error {
	if j, ok := nv.Value.(json.RawMessage); ok {
		if j == nil {
			nv.Value = nil
		} else {
			nv.Value = string(j)
		}
		return nil
	}
	return c.pq().CheckNamedValue(nv)
}

func (c *pooledConn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	return c.pq().BeginTx(ctx, opts)
}

func (c *pooledConn) PrepareContext(ctx context.Context, query string) (driver.Stmt, error) {
	return c.pq().PrepareContext(ctx, query)
}

func (c *pooledConn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	return c.pq().QueryContext(ctx, query, args)
}

func (c *pooledConn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	return c.pq().ExecContext(ctx, query, args)
}

func (c *pooledConn) Ping(ctx context.Context) error { return c.pq().Ping(ctx) }

func (c *pooledConn) ResetSession(ctx context.Context) error { return c.pq().ResetSession(ctx) }

func (c *pooledConn) IsValid() bool { return c.pq().IsValid() }
