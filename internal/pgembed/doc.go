// Package pgembed starts a private PostgreSQL server from the PostgreSQL
// binaries installed on the machine (no bundled or downloaded binaries, no
// third-party embedded-postgres library).
//
// # Lifecycle
//
// [Start] prepares Options.Dir, runs initdb into Dir/pgdata when that folder
// holds no cluster yet (an existing cluster is reused, so data survives
// between runs), launches the postgres server process bound to 127.0.0.1 on
// Options.Port (a free port when 0; unix sockets are disabled) and returns
// once a real connection answers a query. The server's stdout and stderr are
// appended to Dir/postgres.log; when startup fails, the error includes the
// last lines of that log. Authentication is "trust" for the superuser
// "postgres": the server is meant for development and tests on a trusted
// machine, reachable only through loopback. [Postgres.URL] builds connection
// URLs; the "postgres" database always exists, and callers create their own
// databases through it.
//
// [Postgres.Stop] asks for a fast shutdown (SIGINT), waits for the process to
// exit, and escalates to SIGQUIT and then SIGKILL if it takes too long. Stop
// is safe to call more than once. Start does not watch its context after it
// returns: stopping the server when the program shuts down is the caller's
// job. The server runs in its own process group, so a Ctrl-C in the terminal
// reaches only the Go program, which can then stop the server after its own
// shutdown.
//
// Options.Durable selects between production-like settings (fsync and
// synchronous_commit on, as for `make run`) and fast, crash-unsafe settings
// for tests (fsync, synchronous_commit and full_page_writes off; initdb
// without syncing).
//
// # Orphan guard
//
// The server must never outlive the program that started it. Two mechanisms
// ensure this:
//
//   - On Linux the postgres process gets a parent-death signal (SIGQUIT,
//     PostgreSQL's immediate shutdown), so it stops even when the Go program
//     is killed with SIGKILL. Linux delivers that signal when the OS thread
//     that started the process exits; the Go runtime does not end threads
//     unless a goroutine exits while locked with runtime.LockOSThread, so do
//     not call Start from such a goroutine.
//   - At Start, if Dir/pgdata/postmaster.pid names a live postgres process
//     serving that folder (left by a previous run that died without Stop, or
//     on a system without parent-death signals), that process is stopped with
//     SIGQUIT (SIGKILL if it does not exit) before the new server starts. A
//     postmaster.pid naming a process that is not such a server is removed.
//
// # One owner per folder
//
// A server is reclaimed only when the program that owns it is gone. Start
// takes an exclusive flock on Dir/owner.lock (holding the owner's pid) and
// keeps it until Stop; the kernel drops it when the owner exits, kill -9
// included. A second Start on a folder whose owner lives fails with
// ErrFolderInUse, naming that process and how to use another folder, and
// touches nothing of the running server.
//
// # Running as root
//
// initdb and postgres refuse to run as root. When the program runs as root,
// both are run as the OS user "postgres" (which must exist), with HOME and
// the working folder set to Dir. Dir itself, any of its parents that Start
// creates, the pgdata folder and the log file are then owned by that user;
// parents that already exist must be enterable by it (a folder from
// t.TempDir, mode 0700 and owned by root, is not: use a folder under
// os.TempDir instead). When not root, everything runs as the current user.
//
// # Binaries
//
// The binaries are looked up in this order: the folder named by the
// TURNGATE_PG_BIN environment variable (exclusively, when set); the highest
// version under /usr/lib/postgresql/*/bin (Debian and Ubuntu layout),
// preferring the version that created an existing cluster; `pg_config
// --bindir`; the folder of initdb on PATH. When none has both initdb and
// postgres, Start returns [ErrNoBinaries].
//
// # What it must not import
//
// pgembed imports no package of this module: the server, its command, the
// test kits (dbtest, withpostgres) and migrations' generator start
// PostgreSQL through it.
package pgembed
