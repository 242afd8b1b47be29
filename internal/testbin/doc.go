// Command testbin runs test binaries that `go test -c -o DIR/` built, as
// `go test -json` would run the same packages, and prints what go test
// -json prints (test2json's events, one line each), so gotestsum reads it
// with --raw-command:
//
//	go test -race -c -o bin/testbin/race/ ./lease/... ./turn/...
//	go run ./internal/testbin -dir bin/testbin/race -- -test.count=1 -test.timeout=10m -- ./lease/... ./turn/...
//
// Why: go test links every test binary again on every run, and make test
// has some sixty of them (about 80 CPU-seconds of linking on 2 cores).
// go test -c -o skips a link whose output is up to date, as go build -o
// does, so a run that changed nothing links nothing.
//
// Each binary runs in its package's folder, as go test runs it, with the
// given flags and -test.v=test2json; its output, followed by go test's
// "ok" or "FAIL" line with the elapsed time, goes through `go tool
// test2json -t -p <package>`. Packages start in the order given (go
// list's order for each pattern), at most -p at a time (go test's
// default, the number of CPUs); their events are written whole lines at
// a time. Packages without test files are skipped, whatever binaries DIR
// still holds for them. The exit status is 1 when any package failed.
//
// # What it must not import
//
// testbin imports no package of this module: it runs test binaries, whatever
// they test.
package main
