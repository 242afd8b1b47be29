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
