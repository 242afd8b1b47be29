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
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"runtime"
	"sync"
	"time"
)

func main() {
	dir := flag.String("dir", "", "the folder `go test -c -o` wrote the binaries to")
	par := flag.Int("p", runtime.NumCPU(), "packages run at once")
	flag.Usage = func() {
		fmt.Fprintln(os.Stderr, "usage: testbin -dir DIR [-p N] -- [test flags] -- packages...")
		flag.PrintDefaults()
	}
	flag.Parse()
	testFlags, patterns, ok := split(flag.Args())
	if *dir == "" || !ok || len(patterns) == 0 || *par < 1 {
		flag.Usage()
		os.Exit(2)
	}
	pkgs, err := list(patterns)
	if err != nil {
		fmt.Fprintf(os.Stderr, "testbin: %v\n", err)
		os.Exit(1)
	}
	out := &lineWriter{w: os.Stdout}
	failed := false
	var mu sync.Mutex
	var wg sync.WaitGroup
	slots := make(chan struct{}, *par)
	for _, p := range pkgs {
		slots <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-slots; wg.Done() }()
			if err := runPackage(p, *dir, testFlags, out); err != nil {
				mu.Lock()
				failed = true
				mu.Unlock()
				if !errors.Is(err, errTestsFailed) {
					fmt.Fprintf(os.Stderr, "testbin: %s: %v\n", p.ImportPath, err)
				}
			}
		}()
	}
	wg.Wait()
	if failed {
		os.Exit(1)
	}
}

// split parses "[test flags] -- packages..." (the first "--" ends flag's
// own arguments and is already gone).
func split(args []string) (flags, patterns []string, ok bool) {
	for i, a := range args {
		if a == "--" {
			return args[:i], args[i+1:], true
		}
	}
	return nil, nil, false
}

type pkg struct {
	ImportPath   string
	Dir          string
	TestGoFiles  []string
	XTestGoFiles []string
}

// list resolves the patterns as go test does, in go list's order, keeping
// the packages that have tests, each once.
func list(patterns []string) ([]pkg, error) {
	cmd := exec.Command("go", append([]string{"list", "-json=ImportPath,Dir,TestGoFiles,XTestGoFiles", "--"}, patterns...)...)
	cmd.Stderr = os.Stderr
	raw, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go list: %w", err)
	}
	var pkgs []pkg
	seen := map[string]bool{}
	dec := json.NewDecoder(bytes.NewReader(raw))
	for {
		var p pkg
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			return nil, fmt.Errorf("go list: %w", err)
		}
		if len(p.TestGoFiles)+len(p.XTestGoFiles) == 0 || seen[p.ImportPath] {
			continue
		}
		seen[p.ImportPath] = true
		pkgs = append(pkgs, p)
	}
	return pkgs, nil
}

var errTestsFailed = errors.New("tests failed")

// runPackage runs p's binary in p's folder and its output through
// test2json, as go test -json does.
func runPackage(p pkg, dir string, testFlags []string, out *lineWriter) error {
	// go test -c -o DIR/ names each binary after the last element of
	// its import path.
	bin, err := filepath.Abs(filepath.Join(dir, path.Base(p.ImportPath)+".test"))
	if err != nil {
		return err
	}
	if _, err := os.Stat(bin); err != nil {
		return fmt.Errorf("no test binary (build it with go test -c -o %s/): %w", dir, err)
	}
	conv := exec.Command("go", "tool", "test2json", "-t", "-p", p.ImportPath)
	conv.Stderr = os.Stderr
	in, err := conv.StdinPipe()
	if err != nil {
		return err
	}
	events, err := conv.StdoutPipe()
	if err != nil {
		return err
	}
	if err := conv.Start(); err != nil {
		return err
	}
	copied := make(chan error, 1)
	go func() { copied <- out.copyLines(events) }()

	test := exec.Command(bin, append([]string{"-test.v=test2json", "-test.paniconexit0"}, testFlags...)...)
	test.Dir = p.Dir
	test.Stdout, test.Stderr = in, in
	start := time.Now()
	runErr := test.Run()
	// go test's own last line for the package, which test2json turns
	// into the package's pass or fail event with its elapsed time.
	status := "ok  "
	if runErr != nil {
		status = "FAIL"
	}
	fmt.Fprintf(in, "%s\t%s\t%.3fs\n", status, p.ImportPath, time.Since(start).Seconds())
	in.Close()
	copyErr := <-copied
	convErr := conv.Wait()
	if exit := (*exec.ExitError)(nil); runErr != nil && !errors.As(runErr, &exit) {
		return runErr // it did not start
	}
	if err := errors.Join(copyErr, convErr); err != nil {
		return fmt.Errorf("test2json: %w", err)
	}
	if runErr != nil {
		return errTestsFailed
	}
	return nil
}

// lineWriter writes whole lines from several readers to w, one line at a
// time, so the packages' events do not interleave within a line.
type lineWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lineWriter) copyLines(r io.Reader) error {
	br := bufio.NewReaderSize(r, 64<<10)
	for {
		line, err := br.ReadBytes('\n')
		if len(line) > 0 {
			if !bytes.HasSuffix(line, []byte("\n")) {
				line = append(line, '\n')
			}
			l.mu.Lock()
			_, werr := l.w.Write(line)
			l.mu.Unlock()
			if werr != nil {
				return werr
			}
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
	}
}
