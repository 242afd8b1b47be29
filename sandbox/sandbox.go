package sandbox

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"go.starlark.net/lib/json"
	"go.starlark.net/lib/math"
	"go.starlark.net/resolve"
	"go.starlark.net/starlark"
	"go.starlark.net/syntax"
)

// The errors Pool.Run returns wrap exactly one of these sentinels (test
// with errors.Is) together with a message meant for the model that wrote
// the script, except for request mistakes and a pool that is not running
// (plain errors: the caller's doing, not the script's).
var (
	// ErrSteps: the script ran out of Limits.MaxSteps execution steps.
	ErrSteps = errors.New("sandbox: step limit exceeded")
	// ErrOutput: printed output and written files together would exceed
	// Limits.MaxOutput bytes, or the script wrote more than Limits.MaxFiles
	// files.
	ErrOutput = errors.New("sandbox: output limit exceeded")
	// ErrWallTime: the script ran longer than Limits.WallTime, or the
	// caller's context ended (while it ran or while it waited for a
	// worker); in the latter case the error also wraps ctx.Err().
	ErrWallTime = errors.New("sandbox: wall time exceeded")
	// ErrMemory: the script needed more memory than PoolConfig.Memory; its
	// worker process died of it and was replaced. Nothing the script
	// printed or wrote is returned.
	ErrMemory = errors.New("sandbox: memory limit exceeded")
	// ErrBusy: every worker was busy and PoolConfig.Queue runs were
	// already waiting, so the script was not run.
	ErrBusy = errors.New("sandbox: busy")
	// ErrScript: the script has a syntax or name-resolution error (for
	// instance "undefined: open"), or failed at run time, including
	// recursion deeper than 5,000 calls. The message holds the Starlark
	// error with its position (a traceback for run-time errors).
	ErrScript = errors.New("sandbox: script error")
	// ErrRefused: the script asked for a capability the sandbox does not
	// offer: load of any module, or write_file/read_input with a name that
	// is not a plain file name (a path, a leading dot, ...).
	ErrRefused = errors.New("sandbox: refused")
	// ErrInputDigest: an Input's SHA256 is missing or does not match its
	// Data. Pool.Run checks every input before it runs anything.
	ErrInputDigest = errors.New("sandbox: input digest mismatch")
)

// Default limits, used for every Limits field that is zero (or negative).
const (
	DefaultMaxSteps  uint64 = 1_000_000
	DefaultMaxOutput        = 64 << 10
	DefaultMaxFiles         = 8
	DefaultWallTime         = 2 * time.Second
)

// MaxNameLen is the longest file or input name a script may use, in bytes.
const MaxNameLen = 128

// scriptName is the file name Starlark positions are reported against.
const scriptName = "script.star"

// Limits bound one run. A zero field means its default.
type Limits struct {
	// MaxSteps bounds Starlark execution steps; default 1,000,000.
	MaxSteps uint64
	// MaxOutput bounds the bytes of printed output (each print counts its
	// trailing newline) plus the current contents of written files;
	// default 64 KiB.
	MaxOutput int
	// MaxFiles bounds the number of distinct files the script may write;
	// default 8.
	MaxFiles int
	// WallTime bounds the run's duration, from the moment a worker takes
	// it (waiting for a worker does not count); default 2s, and never
	// more than PoolConfig.WallTime.
	WallTime time.Duration
}

func (l Limits) withDefaults() Limits {
	if l.MaxSteps == 0 {
		l.MaxSteps = DefaultMaxSteps
	}
	if l.MaxOutput <= 0 {
		l.MaxOutput = DefaultMaxOutput
	}
	if l.MaxFiles <= 0 {
		l.MaxFiles = DefaultMaxFiles
	}
	if l.WallTime <= 0 {
		l.WallTime = DefaultWallTime
	}
	return l
}

// File is a file a script wrote with write_file.
type File struct {
	Name string
	Data []byte
}

// Input is a read-only input the script can read with read_input(Name).
// SHA256 is the lowercase or uppercase hex digest of Data; Pool.Run refuses
// the whole request with ErrInputDigest when it is missing or does not
// match.
// Name must be a plain file name: 1–128 characters of [A-Za-z0-9._-], not
// starting with a dot.
type Input struct {
	Name   string
	Data   []byte
	SHA256 string
}

// Request is one script run.
type Request struct {
	// Script is the Starlark source. Positions in errors refer to it as
	// "script.star".
	Script string
	// Inputs are exposed read-only via read_input(name).
	Inputs []Input
	// Now is the script's only clock, exposed as the predeclared string
	// now (RFC 3339 in UTC, e.g. "2026-01-02T03:04:05Z"). When zero, now
	// is not defined at all.
	Now time.Time
	// Limits bound the run.
	Limits Limits
}

// Result is what a script produced.
type Result struct {
	// Output is everything print wrote, one line per call.
	Output string
	// Files are the files written with write_file, in the order of their
	// first write; writing a name again replaces its content.
	Files []File
	// Steps is the number of Starlark execution steps the script used.
	Steps uint64
}

// execute runs req.Script in this process and returns what it printed and
// wrote. It is the engine of a worker process (see doc.go); nothing here
// bounds memory, and a single step (one string repetition, one sort) is
// not interrupted by the watchdogs, which is why the server never calls it
// itself.
//
// Request problems are reported before anything runs: an input with a bad
// digest (ErrInputDigest), and an input with an invalid or duplicate name
// (a plain error). After the script has started, an error wraps one of
// ErrSteps, ErrOutput, ErrWallTime, ErrScript or ErrRefused, and the Result
// still holds the output, files and steps produced before the script
// stopped.
func execute(ctx context.Context, req Request) (Result, error) {
	start := time.Now()
	lim := req.Limits.withDefaults()

	inputs, err := checkInputs(req.Inputs)
	if err != nil {
		return Result{}, err
	}
	if err := ctx.Err(); err != nil {
		return Result{}, fmt.Errorf("%w: not started: %w", ErrWallTime, err)
	}

	r := &run{lim: lim, inputs: inputs}
	thread := &starlark.Thread{
		Name: "run_code",
		// The predeclared print shadows the universe's, which is the only
		// caller of Thread.Print; this is a safety net that never writes
		// to the process's stderr.
		Print: func(_ *starlark.Thread, msg string) { _ = r.emit(msg) },
		Load: func(*starlark.Thread, string) (starlark.StringDict, error) {
			return nil, detailed(ErrRefused, "load is not available in this sandbox (json and math are predeclared)")
		},
	}
	// The step limit is set in chunks so that the call depth is checked
	// every depthCheckSteps steps (see onSteps).
	thread.SetMaxExecutionSteps(min(depthCheckSteps, lim.MaxSteps))
	thread.OnMaxSteps = r.onSteps

	// The watchdogs only cancel the thread; Cancel is safe from any
	// goroutine. Neither needs a goroutine of its own while idle.
	timer := time.AfterFunc(lim.WallTime-time.Since(start), func() { r.stop(thread, stopWall) })
	unwatch := context.AfterFunc(ctx, func() { r.stop(thread, stopCtx) })

	predeclared := starlark.StringDict{
		"print":      starlark.NewBuiltin("print", r.printBuiltin),
		"json":       json.Module,
		"math":       math.Module,
		"write_file": starlark.NewBuiltin("write_file", r.writeFile),
		"read_input": starlark.NewBuiltin("read_input", r.readInput),
	}
	if !req.Now.IsZero() {
		predeclared["now"] = starlark.String(req.Now.UTC().Format(time.RFC3339Nano))
	}

	_, err = starlark.ExecFileOptions(fileOptions, thread, scriptName, req.Script, predeclared)
	timer.Stop()
	unwatch()
	r.stopped.CompareAndSwap(stopNone, stopDone)

	res := Result{Output: r.out.String(), Files: r.files, Steps: thread.ExecutionSteps()}
	if err != nil {
		return res, r.classify(ctx, err)
	}
	return res, nil
}

// fileOptions is the Starlark dialect: Python-like control flow, with
// while loops, recursion and if/for/while at the top level allowed.
var fileOptions = &syntax.FileOptions{
	Set:             true,
	While:           true,
	TopLevelControl: true,
	GlobalReassign:  true,
	Recursion:       true,
}

// Why the thread stopped early. The first reason recorded wins.
const (
	stopNone int32 = iota
	stopSteps
	stopWall
	stopCtx
	stopDepth
	stopDone // the script finished; later watchdog firings change nothing
)

// Starlark's own limit on recursion is 100,000 calls, which takes some
// 256 MiB of goroutine stack. The sandbox allows maxCallDepth, checked every
// depthCheckSteps steps; as a call takes at least one step, the stack never
// exceeds maxCallDepth+depthCheckSteps frames (a few MiB).
const (
	maxCallDepth    = 5000
	depthCheckSteps = 500
)

// onSteps is the thread's OnMaxSteps: it stops the script when it has used
// its steps or recursed too deep, and otherwise lets it run another
// depthCheckSteps steps.
func (r *run) onSteps(t *starlark.Thread) {
	switch steps := t.ExecutionSteps(); {
	case steps >= r.lim.MaxSteps:
		r.stop(t, stopSteps)
	case t.CallStackDepth() > maxCallDepth:
		r.stop(t, stopDepth)
	default:
		t.SetMaxExecutionSteps(min(steps+depthCheckSteps, r.lim.MaxSteps))
	}
}

// run is the state of one execute. Only the interpreter's goroutine touches it,
// except stopped, which the watchdogs set.
type run struct {
	lim     Limits
	inputs  map[string]starlark.String
	out     strings.Builder
	files   []File
	used    int          // bytes printed plus the current size of written files
	stopped atomic.Int32 // a stop* reason, recorded before the thread is cancelled
}

// stop records why the thread is being stopped and cancels it.
func (r *run) stop(t *starlark.Thread, why int32) {
	if r.stopped.CompareAndSwap(stopNone, why) {
		t.Cancel(stopReasons[why])
	}
}

var stopReasons = map[int32]string{
	stopSteps: "too many steps",
	stopWall:  "wall time exceeded",
	stopCtx:   "cancelled by the caller",
	stopDepth: "call stack too deep",
}

// printBuiltin is the script's print(*args, sep=" "), formatted like
// Starlark's own but captured and counted against MaxOutput.
func (r *run) printBuiltin(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	sep := " "
	if err := starlark.UnpackArgs(b.Name(), nil, kwargs, "sep?", &sep); err != nil {
		return nil, err
	}
	var buf strings.Builder
	for i, v := range args {
		if i > 0 {
			buf.WriteString(sep)
		}
		var text string
		switch v := v.(type) {
		case starlark.String:
			text = string(v)
		case starlark.Bytes:
			text = string(v)
		default:
			text = v.String()
		}
		// The line is measured before it is copied: a line far over the
		// limit is refused without copying it.
		if n := buf.Len() + len(text) + 1; r.used+n > r.lim.MaxOutput {
			// Stop building a line that cannot be printed anyway.
			size := strconv.Itoa(n)
			if i < len(args)-1 {
				size = "at least " + size
			}
			return nil, r.overflow("print", size)
		}
		buf.WriteString(text)
	}
	return starlark.None, r.emit(buf.String())
}

// emit appends one printed line to the output.
func (r *run) emit(msg string) error {
	if n := len(msg) + 1; r.used+n > r.lim.MaxOutput {
		return r.overflow("print", strconv.Itoa(n))
	}
	r.used += len(msg) + 1
	r.out.WriteString(msg)
	r.out.WriteByte('\n')
	return nil
}

func (r *run) overflow(what, n string) error {
	return detailed(ErrOutput, "%s: %s more bytes would exceed the limit of %d bytes of output and files (%d used)",
		what, n, r.lim.MaxOutput, r.used)
}

// writeFile is the script's write_file(name, content).
func (r *run) writeFile(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var name string
	var content starlark.Value
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "name", &name, "content", &content); err != nil {
		return nil, err
	}
	if !ValidName(name) {
		return nil, refusedName(b.Name(), name)
	}
	var data []byte
	switch c := content.(type) {
	case starlark.String:
		data = []byte(c)
	case starlark.Bytes:
		data = []byte(c)
	default:
		return nil, fmt.Errorf("content must be a string or bytes, not %s", content.Type())
	}

	i := 0
	for i < len(r.files) && r.files[i].Name != name {
		i++
	}
	old := 0
	if i < len(r.files) {
		old = len(r.files[i].Data)
	} else if len(r.files) >= r.lim.MaxFiles {
		return nil, detailed(ErrOutput, "write_file(%q): the script may write at most %d files (writing an existing name replaces it)",
			name, r.lim.MaxFiles)
	}
	if r.used-old+len(data) > r.lim.MaxOutput {
		return nil, r.overflow(fmt.Sprintf("write_file(%q)", name), strconv.Itoa(len(data)-old))
	}
	r.used += len(data) - old
	if i < len(r.files) {
		r.files[i].Data = data
	} else {
		r.files = append(r.files, File{Name: name, Data: data})
	}
	return starlark.None, nil
}

// readInput is the script's read_input(name).
func (r *run) readInput(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var name string
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "name", &name); err != nil {
		return nil, err
	}
	if !ValidName(name) {
		return nil, refusedName(b.Name(), name)
	}
	data, ok := r.inputs[name]
	if !ok {
		return nil, fmt.Errorf("no input named %q (%s)", name, r.inputList())
	}
	return data, nil
}

func (r *run) inputList() string {
	if len(r.inputs) == 0 {
		return "there are no inputs"
	}
	names := make([]string, 0, len(r.inputs))
	for n := range r.inputs {
		names = append(names, strconv.Quote(n))
	}
	slices.Sort(names)
	return "inputs: " + strings.Join(names, ", ")
}

// ValidName reports whether name is a plain file name: 1–128 characters of
// [A-Za-z0-9._-], not starting with a dot (so neither "." nor "..").
func ValidName(name string) bool {
	if len(name) == 0 || len(name) > MaxNameLen || name[0] == '.' {
		return false
	}
	for i := 0; i < len(name); i++ {
		switch c := name[i]; {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '.', c == '_', c == '-':
		default:
			return false
		}
	}
	return true
}

func refusedName(fn, name string) error {
	return detailed(ErrRefused, "%s(%q): not a plain file name; the sandbox has no filesystem, only names of 1-%d characters of A-Z a-z 0-9 . _ - not starting with a dot",
		fn, name, MaxNameLen)
}

// checkInputs verifies every input's name and digest and returns the inputs
// by name.
func checkInputs(in []Input) (map[string]starlark.String, error) {
	if len(in) == 0 {
		return nil, nil
	}
	byName := make(map[string]starlark.String, len(in))
	for i, input := range in {
		if !ValidName(input.Name) {
			return nil, fmt.Errorf("sandbox: input %d: invalid name %q (want 1-%d characters of A-Z a-z 0-9 . _ - not starting with a dot)", i, input.Name, MaxNameLen)
		}
		if _, dup := byName[input.Name]; dup {
			return nil, fmt.Errorf("sandbox: input %d: duplicate name %q", i, input.Name)
		}
		want, err := hex.DecodeString(input.SHA256)
		if err != nil || len(want) != sha256.Size {
			return nil, fmt.Errorf("%w: input %q: SHA256 %q is not a hex SHA-256 digest", ErrInputDigest, input.Name, input.SHA256)
		}
		if got := sha256.Sum256(input.Data); !bytes.Equal(got[:], want) {
			return nil, fmt.Errorf("%w: input %q: SHA256 %s does not match its data (%x)", ErrInputDigest, input.Name, input.SHA256, got)
		}
		byName[input.Name] = starlark.String(input.Data)
	}
	return byName, nil
}

// detailedError carries one of the sentinels through the interpreter, which
// wraps a built-in's error in an *starlark.EvalError that unwraps to it.
type detailedError struct {
	kind error
	msg  string
}

func (e *detailedError) Error() string { return e.msg }
func (e *detailedError) Unwrap() error { return e.kind }

func detailed(kind error, format string, args ...any) error {
	return &detailedError{kind: kind, msg: fmt.Sprintf(format, args...)}
}

// classify turns the interpreter's error into one wrapping a sentinel.
func (r *run) classify(ctx context.Context, err error) error {
	var de *detailedError
	if errors.As(err, &de) {
		return fmt.Errorf("%w: %s%s", de.kind, de.msg, where(err))
	}
	switch r.stopped.Load() {
	case stopSteps:
		return fmt.Errorf("%w: the script used its %d execution steps%s", ErrSteps, r.lim.MaxSteps, where(err))
	case stopWall:
		return fmt.Errorf("%w: the script ran longer than %v%s", ErrWallTime, r.lim.WallTime, where(err))
	case stopCtx:
		return fmt.Errorf("%w: the caller cancelled the run%s: %w", ErrWallTime, where(err), ctx.Err())
	case stopDepth:
		return fmt.Errorf("%w: the call stack is deeper than %d calls (unbounded recursion?)%s", ErrScript, maxCallDepth, where(err))
	}

	var evalErr *starlark.EvalError
	var syntaxErr syntax.Error
	var resolveErrs resolve.ErrorList
	switch {
	case errors.As(err, &evalErr):
		return fmt.Errorf("%w: %s", ErrScript, evalErr.Backtrace())
	case errors.As(err, &syntaxErr):
		return fmt.Errorf("%w: %s", ErrScript, syntaxErr.Error())
	case errors.As(err, &resolveErrs):
		msgs := make([]string, len(resolveErrs))
		for i, e := range resolveErrs {
			msgs[i] = e.Pos.String() + ": " + e.Msg
		}
		return fmt.Errorf("%w: %s", ErrScript, strings.Join(msgs, "\n"))
	}
	return fmt.Errorf("%w: %v", ErrScript, err)
}

// where describes the innermost script position of an evaluation error, as
// " (at script.star:LINE:COL in FUNCTION)", or "" when there is none.
func where(err error) string {
	var evalErr *starlark.EvalError
	if !errors.As(err, &evalErr) {
		return ""
	}
	for i := len(evalErr.CallStack) - 1; i >= 0; i-- {
		if fr := evalErr.CallStack[i]; fr.Pos.Filename() == scriptName {
			return fmt.Sprintf(" (at %s in %s)", fr.Pos, fr.Name)
		}
	}
	return ""
}
