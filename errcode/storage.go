package errcode

import (
	"database/sql"
	"database/sql/driver"
	"errors"
	"io"
	"net"
	"strings"
	"syscall"

	"github.com/lib/pq"
)

// StorageUnavailable reports whether err says the database could not be
// reached or could not serve, rather than that the request was wrong: a
// refused or dropped connection, Postgres starting up or shutting down,
// too many clients, a connection pool that is closed, a transaction the
// database rolled back to break a deadlock or a serialization conflict. Such a failure is
// UNAVAILABLE to the client, who may retry (with the same idempotency key
// or command id: a COMMIT whose answer was lost may have landed).
func StorageUnavailable(err error) bool {
	if err == nil {
		return false
	}
	var pqErr *pq.Error
	if errors.As(err, &pqErr) {
		switch pqErr.Code.Class() {
		case "40": // transaction rollback: a deadlock victim or a serialization failure; retrying is safe
			return true
		case "08", // connection exception
			"53", // insufficient resources: too many connections, out of memory, disk full
			"57": // operator intervention: admin/crash shutdown, cannot connect now
			return pqErr.Code != "57014" // query_canceled is the caller's own cancel
		}
		return false
	}
	var netErr net.Error
	var opErr *net.OpError
	switch {
	case errors.Is(err, driver.ErrBadConn),
		errors.Is(err, sql.ErrConnDone),
		errors.Is(err, io.ErrUnexpectedEOF),
		errors.Is(err, io.EOF),
		errors.Is(err, syscall.ECONNREFUSED),
		errors.Is(err, syscall.ECONNRESET),
		errors.Is(err, syscall.EPIPE),
		errors.Is(err, syscall.ENOENT) && strings.Contains(err.Error(), ".s.PGSQL"),
		errors.As(err, &opErr),
		errors.As(err, &netErr) && netErr.Timeout():
		return true
	}
	// database/sql reports a closed pool with an unexported error.
	return strings.Contains(err.Error(), "sql: database is closed") ||
		strings.Contains(err.Error(), "pq: the database system is")
}
