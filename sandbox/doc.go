// Package sandbox runs the scripts of the run_code tool.
//
// # The language
//
// A script is Starlark (https://github.com/google/starlark-go), a small,
// deterministic dialect of Python. The interpreter has no network, no
// filesystem and no clock of its own; a script sees only what a Request gives
// it:
//
//   - Starlark's universe (len, range, str, dict, sorted, set, ...), with
//     print captured into Result.Output;
//   - json (encode, decode, indent) and math, both pure;
//   - write_file(name, content), whose files come back in Result.Files;
//   - read_input(name), which returns a digest-verified Request.Inputs entry;
//   - now, an ISO-8601 UTC string, only when Request.Now is set.
//
// load is refused, and there is no time module, open, os or http. Nothing
// a script can reach depends on the environment, so the same Request gives
// the same Result, unless a limit or the caller's context interrupts it.
//
// # The bounds
//
// Limits bound one run's steps, output, files and wall time; recursion is
// allowed up to 5,000 nested calls. PoolConfig bounds what all runs
// together may hold on a replica: Memory per run (default 128 MiB),
// Workers runs at once (4), Queue runs waiting for a worker (64; past it
// Run refuses at once with ErrBusy), and the longest WallTime (2s).
//
// # Why worker processes
//
// Steps bound what a script builds element by element, but one Starlark
// step can do a great deal: "x" * 1000000000 allocates 1 GB, [0] *
// 100000000 writes 1.6 GB, int("9" * 2000000) computes for seven seconds.
// In the server's own process none of that can be stopped: the
// interpreter's Thread.Cancel is only looked at between steps (measured:
// [0] * 100000000 ran 9.9 s past a 2 s limit and reached 2.6 GB), Go has
// no per-goroutine memory accounting or allocation hook to meter a run by,
// and debug.SetMemoryLimit is process-wide and only makes the collector
// work harder. A process can be given a hard memory limit of its own and
// killed at any instant without harm to anyone else, so scripts run in
// worker processes, and the interpreter (execute, in sandbox.go) is their
// engine.
//
// # Workers
//
// A Pool starts PoolConfig.Workers worker processes of its own binary
// (/proc/self/exe, so a server replaced on disk still starts its own
// version), marked by the environment variable TURNGATE_SANDBOX_WORKER=1.
// This package's init sees it and serves as a worker instead of returning,
// so the server binary and every test binary that imports the package are
// workers too, without help from their main. A worker gets only the Go
// runtime's variables of the server's environment (none of its secrets),
// its own process group (a terminal's ^C reaches the server, which stops
// the workers in order), and a niceness of 10, so that the server comes
// first when scripts load every CPU.
//
// The pool and a worker speak gob over the worker's stdin and stdout (see
// wire.go): a hello, then one run at a time, each acknowledged as the
// worker takes it and then answered by one reply. A worker that dies
// before its acknowledgement never started the script: the run goes to
// another worker.
// The worker stops a run itself at its wall time or when the pool sends a
// cancel (the caller's context ended), between two steps, and replies
// with what the script had done. A worker that has not replied 250 ms
// after that is stuck in one step: the pool kills it (SIGKILL) and the run
// ends with ErrWallTime. A worker that dies or is killed is replaced in
// the background. Warm, a trivial script's start-to-result is some
// 0.1 ms (BenchmarkTrivialScript).
//
// # Memory
//
// Three bounds, from the softest:
//
//   - debug.SetMemoryLimit, an eighth below the budget: near the budget
//     the collector works hard first, so a script that fits runs, slower;
//   - RLIMIT_AS, the worker's address space at start plus the budget (plus
//     room for thread stacks): an allocation bigger than the budget fails
//     at once, before a byte of it is touched, and the Go runtime dies of
//     "out of memory". Not RLIMIT_DATA, although it counts only committed
//     memory: the runtime reserves address space and later maps it with
//     MAP_FIXED, which the kernel checks against RLIMIT_DATA only for its
//     net growth (measured: a worker limited to its idle VmData plus
//     128 MiB by RLIMIT_DATA filled [0] * 100000000 past 1.3 GB);
//   - the pool reads a busy worker's anonymous resident memory every 2 ms
//     (/proc/<pid>/statm) and kills the worker once it exceeds its idle
//     figure plus the budget. This is the bound on what the machine
//     actually spends; address space says little about residency.
//
// A worker that died of its memory (killed by the watch, or the runtime's
// own out-of-memory report, see outOfMemory) ends the run with ErrMemory;
// nothing the script had printed or written survives it. After a run that
// grew the heap, a worker hands the pages back to the OS
// (debug.FreeOSMemory), so idle workers stay small.
//
// # Lifetime
//
// Start starts the workers and waits for their hello; Stop kills them all,
// busy ones included, and waits until they have exited. A worker also dies
// when the thread that started it does (Pdeathsig, SIGKILL) and exits when
// its stdin reaches EOF, which happens when the server dies however it
// dies: no worker outlives its server.
//
// # What it must not import
//
// sandbox is a leaf: it imports no package of this module, and outside the
// standard library only the Starlark interpreter. What a script may see is
// what its caller (tools, resource) hands it.
package sandbox
