package pg

import (
	"container/list"
	"context"
	"database/sql"
	"database/sql/driver"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/lib/pq"
)

// Open opens the database at dsn with every statement sent in one
// exchange with the server, and each one planned once per connection.
//
// lib/pq sends a statement with parameters as two exchanges by default
// (Parse and Describe, then Bind and Execute, each ending in Sync): two
// round trips for every statement a turn makes, where one does. Open sets
// lib/pq's binary_parameters, which sends the whole statement in one
// exchange. In that mode lib/pq sends []byte parameters in binary format,
// which is right for bytea and wrong for jsonb (whose binary format
// starts with a version byte): JSON values (json.RawMessage, as ent
// passes JSON fields) are sent as text instead.
//
// Sent that way, an unnamed statement is parsed and planned again every
// time: a turn's statements, some with the authority predicates inlined,
// cost PostgreSQL milliseconds of planning each. So each connection keeps
// the statements it runs with parameters prepared under a name of its
// own, up to [MaxPrepared] of them (least recently used out): the first
// run of a statement on a connection prepares it (one exchange more), the
// next ones bind and execute it in one exchange, and PostgreSQL keeps its
// plan (a generic one once that costs no more than the custom ones).
// Results come back as text, as before.
//
// Behind a pooler in transaction pooling mode (PgBouncer's pool_mode =
// transaction), open with [OpenUnprepared]: a named statement lives on one
// server connection, and the pooler hands the next transaction another.
// Callers must not rely on session state either: LISTEN, session advisory
// locks and SET belong on a direct connection.
func Open(dsn string) (*sql.DB, error) { return open(dsn, true) }

// OpenUnprepared is [Open] for a database behind a transaction pooler:
// every statement goes as an unnamed one, parsed and planned each time.
func OpenUnprepared(dsn string) (*sql.DB, error) { return open(dsn, false) }

// MaxPrepared bounds the statements a connection of [Open] keeps prepared.
const MaxPrepared = 256

func open(dsn string, prepare bool) (*sql.DB, error) {
	cfg, err := pq.NewConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("database URL: %w", err)
	}
	cfg.BinaryParameters = true
	cfg.DisablePreparedBinaryResult = true // text results, as unnamed statements give
	c, err := pq.NewConnectorConfig(cfg)
	if err != nil {
		return nil, err
	}
	return sql.OpenDB(pooledConnector{c, prepare}), nil
}

type pooledConnector struct {
	c       *pq.Connector
	prepare bool
}

func (p pooledConnector) Connect(ctx context.Context) (driver.Conn, error) {
	c, err := p.c.Connect(ctx)
	if err != nil {
		return nil, err
	}
	pc := &pooledConn{Conn: c}
	if p.prepare {
		pc.stmts, pc.lru = map[string]*list.Element{}, list.New()
	}
	return pc, nil
}

func (p pooledConnector) Driver() driver.Driver { return p.c.Driver() }

// pooledConn is lib/pq's connection with JSON parameters sent as text,
// and, when stmts is not nil, the statements it ran with parameters kept
// prepared. It forwards every optional interface lib/pq's connection
// implements. database/sql uses a connection from one goroutine at a
// time, and not while rows of it are open: the cache needs no lock, and
// a statement it closes has no rows open.
type pooledConn struct {
	driver.Conn
	stmts map[string]*list.Element // the query's text -> its element of lru
	lru   *list.List               // of *preparedStmt, most recently used first
}

type preparedStmt struct {
	query string
	st    driver.Stmt
}

// prepared returns query's statement on this connection, preparing it
// (and closing the least recently used one past MaxPrepared) when new.
func (c *pooledConn) prepared(ctx context.Context, query string) (driver.Stmt, error) {
	if e, ok := c.stmts[query]; ok {
		c.lru.MoveToFront(e)
		return e.Value.(*preparedStmt).st, nil
	}
	st, err := c.pq().PrepareContext(ctx, query)
	if err != nil {
		return nil, err
	}
	if c.lru.Len() >= MaxPrepared {
		old := c.lru.Remove(c.lru.Back()).(*preparedStmt)
		delete(c.stmts, old.query)
		if err := old.st.Close(); err != nil {
			st.Close()
			return nil, err
		}
	}
	c.stmts[query] = c.lru.PushFront(&preparedStmt{query: query, st: st})
	return st, nil
}

// forget drops query's statement after an error that says the server no
// longer has it as prepared (26000), or that its plan no longer fits the
// tables (0A000, "cached plan must not change result type", after a
// migration): the next run prepares it again. The server keeps the
// second kind until the connection closes (closing it here could meet an
// aborted transaction, which would cost the connection).
func (c *pooledConn) forget(query string, err error) {
	var pe *pq.Error
	if !errors.As(err, &pe) || (pe.Code != "26000" && pe.Code != "0A000") {
		return
	}
	if e, ok := c.stmts[query]; ok {
		c.lru.Remove(e)
		delete(c.stmts, query)
	}
}

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
	if c.stmts == nil || len(args) == 0 {
		return c.pq().QueryContext(ctx, query, args)
	}
	st, err := c.prepared(ctx, query)
	if err != nil {
		return nil, err
	}
	rows, err := st.(driver.StmtQueryContext).QueryContext(ctx, args)
	if err != nil {
		c.forget(query, err)
	}
	return rows, err
}

func (c *pooledConn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	if c.stmts == nil || len(args) == 0 {
		return c.pq().ExecContext(ctx, query, args)
	}
	st, err := c.prepared(ctx, query)
	if err != nil {
		return nil, err
	}
	res, err := st.(driver.StmtExecContext).ExecContext(ctx, args)
	if err != nil {
		c.forget(query, err)
	}
	return res, err
}

func (c *pooledConn) Ping(ctx context.Context) error { return c.pq().Ping(ctx) }

func (c *pooledConn) ResetSession(ctx context.Context) error { return c.pq().ResetSession(ctx) }

func (c *pooledConn) IsValid() bool { return c.pq().IsValid() }
