package sandbox

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// pool is the worker pool the tests of the interpreter share; the tests of
// the pool itself (pool_test.go) start their own.
var pool *Pool

func TestMain(m *testing.M) {
	pool = NewPool(PoolConfig{Workers: 4, Queue: 64})
	if err := pool.Start(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	pool.Stop()
	if err := goleak.Find(); err != nil && code == 0 {
		fmt.Fprintln(os.Stderr, err)
		code = 1
	}
	os.Exit(code)
}

func runT(t *testing.T, req Request) (Result, error) {
	t.Helper()
	return pool.Run(context.Background(), req)
}

func mustRun(t *testing.T, req Request) Result {
	t.Helper()
	res, err := runT(t, req)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	return res
}

// wantErr checks that err wraps sentinel and mentions every one of subs.
func wantErr(t *testing.T, err, sentinel error, subs ...string) {
	t.Helper()
	if !errors.Is(err, sentinel) {
		t.Fatalf("err = %v, want %v", err, sentinel)
	}
	for _, s := range subs {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("err = %q, want it to mention %q", err, s)
		}
	}
}

func input(name, data string) Input {
	sum := sha256.Sum256([]byte(data))
	return Input{Name: name, Data: []byte(data), SHA256: hex.EncodeToString(sum[:])}
}

func TestPrintAndFiles(t *testing.T) {
	res := mustRun(t, Request{Script: `
print(1 + 1)
print("a", "b", sep="-")
print([1, "x"], b"raw")
write_file("out.txt", "hello")
write_file("data.bin", b"\x00\x01")
def total(xs):
    s = 0
    for x in xs:
        s += x
    return s
print(total(range(5)))
`})
	if want := "2\na-b\n[1, \"x\"] raw\n10\n"; res.Output != want {
		t.Errorf("Output = %q, want %q", res.Output, want)
	}
	want := []File{{Name: "out.txt", Data: []byte("hello")}, {Name: "data.bin", Data: []byte{0, 1}}}
	if !reflect.DeepEqual(res.Files, want) {
		t.Errorf("Files = %q, want %q", res.Files, want)
	}
	if res.Steps == 0 {
		t.Error("Steps = 0, want the steps used")
	}
}

func TestWriteSameNameReplaces(t *testing.T) {
	// Replacing a file frees its old bytes: 8 + 8 would not fit in 12.
	res := mustRun(t, Request{
		Script: `
write_file("a.txt", "12345678")
write_file("b.txt", "b")
write_file("a.txt", "87654321")
`,
		Limits: Limits{MaxOutput: 12, MaxFiles: 2},
	})
	want := []File{{Name: "a.txt", Data: []byte("87654321")}, {Name: "b.txt", Data: []byte("b")}}
	if !reflect.DeepEqual(res.Files, want) {
		t.Errorf("Files = %q, want %q", res.Files, want)
	}
}

func TestDialect(t *testing.T) {
	res := mustRun(t, Request{Script: `
def fact(n):
    return 1 if n <= 1 else n * fact(n - 1)
def depth(n):
    return 0 if n == 0 else 1 + depth(n - 1)
if depth(4900) != 4900:
    fail("recursion")
n = 0
while n < 3:
    n += 1
if n == 3:
    print(fact(10), sorted(set([3, 1, 3, 2])))
`})
	if want := "3628800 [1, 2, 3]\n"; res.Output != want {
		t.Errorf("Output = %q, want %q", res.Output, want)
	}
}

func TestJSONAndMath(t *testing.T) {
	res := mustRun(t, Request{Script: `
d = json.decode('{"a": [1, 2.5, "x"], "b": null}')
print(json.encode({"n": len(d["a"]), "b": d["b"], "s": d["a"][2]}))
print(math.sqrt(16), math.floor(2.7), math.pi > 3.14)
`})
	if want := "{\"b\":null,\"n\":3,\"s\":\"x\"}\n4.0 2 True\n"; res.Output != want {
		t.Errorf("Output = %q, want %q", res.Output, want)
	}
}

func TestLoadRefused(t *testing.T) {
	for _, script := range []string{
		`load("os", "x")`,
		`load("json.star", "encode")`,
		"print('before')\nload(\"@stdlib//time.star\", t = \"time\")",
	} {
		_, err := runT(t, Request{Script: script})
		wantErr(t, err, ErrRefused, "load", "script.star:")
	}
}

func TestStepLimit(t *testing.T) {
	res, err := runT(t, Request{Script: "while True:\n    pass", Limits: Limits{MaxSteps: 10_000}})
	wantErr(t, err, ErrSteps, "10000", "script.star:")
	if res.Steps < 10_000 || res.Steps > 10_100 {
		t.Errorf("Steps = %d, want about 10000", res.Steps)
	}

	// The default limit applies too.
	_, err = runT(t, Request{Script: "def f():\n    for i in range(10000000):\n        pass\nf()"})
	wantErr(t, err, ErrSteps, "1000000", "in f")
}

func TestWallTime(t *testing.T) {
	const wall = 50 * time.Millisecond
	start := time.Now()
	_, err := runT(t, Request{
		Script: "while True:\n    pass",
		Limits: Limits{MaxSteps: 1 << 62, WallTime: wall},
	})
	elapsed := time.Since(start)
	wantErr(t, err, ErrWallTime, "50ms")
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("err = %v: the caller's context did not end", err)
	}
	if elapsed < wall || elapsed > wall+time.Second {
		t.Errorf("stopped after %v, want just over %v", elapsed, wall)
	}
}

func TestContextEnds(t *testing.T) {
	t.Run("deadline mid-run", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		start := time.Now()
		_, err := pool.Run(ctx, Request{Script: "while True:\n    pass", Limits: Limits{MaxSteps: 1 << 62, WallTime: time.Minute}})
		wantErr(t, err, ErrWallTime, "cancelled")
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("err = %v, want it to wrap context.DeadlineExceeded", err)
		}
		if elapsed := time.Since(start); elapsed > 2*time.Second {
			t.Errorf("stopped after %v", elapsed)
		}
	})
	t.Run("cancelled mid-run", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error)
		go func() {
			_, err := pool.Run(ctx, Request{Script: "while True:\n    pass", Limits: Limits{MaxSteps: 1 << 62, WallTime: time.Minute}})
			done <- err
		}()
		cancel()
		select {
		case err := <-done:
			wantErr(t, err, ErrWallTime)
			if !errors.Is(err, context.Canceled) {
				t.Errorf("err = %v, want it to wrap context.Canceled", err)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("Run did not stop when its context was cancelled")
		}
	})
	t.Run("cancelled before", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		res, err := pool.Run(ctx, Request{Script: `write_file("x.txt", "ran")`})
		wantErr(t, err, ErrWallTime)
		if !errors.Is(err, context.Canceled) {
			t.Errorf("err = %v, want it to wrap context.Canceled", err)
		}
		if len(res.Files) != 0 || res.Steps != 0 {
			t.Errorf("Result = %+v, want nothing run", res)
		}
	})
}

func TestOutputLimit(t *testing.T) {
	for name, script := range map[string]string{
		"print loop":     "for i in range(100000):\n    print('line', i)",
		"giant string":   `print("x" * 10000000)`,
		"giant list":     `print(list(range(100000)))`,
		"giant file":     `write_file("big.txt", "y" * 70000)`,
		"files add up":   "for i in range(8):\n    write_file('f%d' % i, 'z' * 10000)",
		"print and file": "print('p' * 40000)\nwrite_file('f', 'q' * 30000)",
	} {
		t.Run(name, func(t *testing.T) {
			res, err := runT(t, Request{Script: script})
			wantErr(t, err, ErrOutput, "65536", "script.star:")
			if n := len(res.Output); n > DefaultMaxOutput {
				t.Errorf("Output has %d bytes, want at most %d", n, DefaultMaxOutput)
			}
		})
	}

	// What came out before the limit is kept, and the limit is exact.
	res, err := runT(t, Request{Script: "for i in range(10):\n    print('abcd')", Limits: Limits{MaxOutput: 10}})
	wantErr(t, err, ErrOutput, "limit of 10 bytes")
	if res.Output != "abcd\nabcd\n" {
		t.Errorf("Output = %q, want the two lines that fit", res.Output)
	}
}

func TestTooManyFiles(t *testing.T) {
	res, err := runT(t, Request{Script: "for i in range(20):\n    write_file('f%d.txt' % i, 'x')"})
	wantErr(t, err, ErrOutput, "at most 8 files", `"f8.txt"`)
	if len(res.Files) != 8 {
		t.Errorf("got %d files, want the 8 written before the limit", len(res.Files))
	}

	_, err = runT(t, Request{Script: "write_file('a', '1')\nwrite_file('b', '2')", Limits: Limits{MaxFiles: 1}})
	wantErr(t, err, ErrOutput, "at most 1 files")
}

func TestBadFileNames(t *testing.T) {
	for _, name := range []string{
		"../x", "/etc/passwd", ".hidden", "a/b", `a\b`, "", ".", "..", "a b", "x\x00", "é.txt",
		strings.Repeat("n", 129),
	} {
		for _, fn := range []string{"write_file(%q, 'data')", "read_input(%q)"} {
			script := fmt.Sprintf(fn, name)
			res, err := runT(t, Request{Script: script, Inputs: []Input{input("ok.txt", "ok")}})
			wantErr(t, err, ErrRefused, "not a plain file name")
			if len(res.Files) != 0 {
				t.Errorf("%s: wrote %q", script, res.Files)
			}
		}
	}
	mustRun(t, Request{Script: fmt.Sprintf("write_file(%q, '')\nwrite_file('a.b-c_D.9', '')", strings.Repeat("n", 128))})
}

func TestScriptErrors(t *testing.T) {
	for _, tc := range []struct {
		name, script string
		subs         []string
	}{
		{"syntax", "print(1 +)", []string{"script.star:1:10", "got"}},
		{"indentation", "if True:\nprint(1)", []string{"script.star:2:6", "want indent"}},
		{"undefined", "x = 1\nprint(y)", []string{"script.star:2:7", "undefined: y"}},
		{"division", "def f(n):\n    return 1 // n\nf(0)", []string{"script.star:2:14", "script.star:3:2", "division by zero"}},
		{"fail", `fail("boom")`, []string{"script.star:1:5", "boom"}},
		{"bad json", `json.decode("{")`, []string{"script.star:1:12", "json.decode"}},
		{"write_file content", `write_file("a", 1)`, []string{"script.star:1:11", "content must be a string or bytes, not int"}},
		{"write_file arguments", `write_file("a")`, []string{"missing argument for content"}},
		{"unknown input", `read_input("missing.txt")`, []string{"script.star:1:11", `no input named "missing.txt"`, `"in.txt"`}},
		{"recursion depth", "def f(n):\n    return f(n + 1)\nf(0)", []string{"deeper than 5000 calls", "script.star:2:", "in f"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := runT(t, Request{Script: tc.script, Inputs: []Input{input("in.txt", "")}})
			wantErr(t, err, ErrScript, tc.subs...)
		})
	}
}

func TestPartialResultOnError(t *testing.T) {
	res, err := runT(t, Request{Script: "print('so far')\nwrite_file('a', 'b')\nfail('late')"})
	wantErr(t, err, ErrScript, "late")
	if res.Output != "so far\n" || len(res.Files) != 1 || res.Steps == 0 {
		t.Errorf("Result = %+v, want what was produced before the failure", res)
	}
}

func TestInputs(t *testing.T) {
	res := mustRun(t, Request{
		Script: `
rows = read_input("data.csv").strip().split("\n")
cfg = json.decode(read_input("cfg.json"))
print(len(rows), rows[1], cfg["k"], len(read_input("bin")))
`,
		Inputs: []Input{input("data.csv", "a,b\n1,2\n"), input("cfg.json", `{"k": "v"}`), input("bin", "\x00\xff")},
	})
	if want := "2 1,2 v 2\n"; res.Output != want {
		t.Errorf("Output = %q, want %q", res.Output, want)
	}

	// Upper-case hex is a digest too.
	in := input("u.txt", "up")
	in.SHA256 = strings.ToUpper(in.SHA256)
	if res := mustRun(t, Request{Script: `print(read_input("u.txt"))`, Inputs: []Input{in}}); res.Output != "up\n" {
		t.Errorf("Output = %q", res.Output)
	}
}

func TestInputDigest(t *testing.T) {
	good := input("good.txt", "fine")
	tampered := input("data.txt", "original")
	tampered.Data = []byte("tampered")
	missing := input("missing.txt", "x")
	missing.SHA256 = ""
	short := input("short.txt", "x")
	short.SHA256 = short.SHA256[:10]

	for _, bad := range []Input{tampered, missing, short} {
		// If the script ran at all, it would print and write a file.
		res, err := runT(t, Request{
			Script: "print('ran')\nwrite_file('proof.txt', 'the script ran')",
			Inputs: []Input{good, bad},
		})
		wantErr(t, err, ErrInputDigest, bad.Name)
		if !reflect.DeepEqual(res, Result{}) {
			t.Errorf("%s: Result = %+v, want nothing: the script must not run", bad.Name, res)
		}
	}
}

func TestInvalidInputs(t *testing.T) {
	for _, inputs := range [][]Input{
		{input("../etc", "x")},
		{input("a.txt", "x"), input("a.txt", "y")},
	} {
		_, err := runT(t, Request{Script: "write_file('x', 'ran')", Inputs: inputs})
		if err == nil || errors.Is(err, ErrScript) || errors.Is(err, ErrInputDigest) {
			t.Errorf("inputs %q: err = %v, want a request error", inputs[len(inputs)-1].Name, err)
		}
	}
}

func TestNoAmbientCapabilities(t *testing.T) {
	for _, name := range []string{"time", "open", "http", "os", "sys", "exec", "eval", "input", "__import__", "subprocess", "socket", "requests", "urllib", "environ", "getenv", "sleep", "random", "struct", "module"} {
		_, err := runT(t, Request{Script: "x = " + name})
		wantErr(t, err, ErrScript, "script.star:1:5", "undefined: "+name)
	}
}

func TestNow(t *testing.T) {
	_, err := runT(t, Request{Script: "print(now)"})
	wantErr(t, err, ErrScript, "undefined: now")

	at := time.Date(2026, 3, 4, 5, 6, 7, 0, time.FixedZone("CET", 3600))
	res := mustRun(t, Request{Script: "print(now)", Now: at})
	if want := "2026-03-04T04:06:07Z\n"; res.Output != want {
		t.Errorf("Output = %q, want %q", res.Output, want)
	}
	parsed, err := time.Parse(time.RFC3339Nano, strings.TrimSpace(res.Output))
	if err != nil || !parsed.Equal(at) {
		t.Errorf("now = %q parses to %v (%v), want %v", res.Output, parsed, err, at)
	}

	res = mustRun(t, Request{Script: "print(now)", Now: time.Date(2026, 1, 2, 3, 4, 5, 600_000_000, time.UTC)})
	if want := "2026-01-02T03:04:05.6Z\n"; res.Output != want {
		t.Errorf("Output = %q, want %q", res.Output, want)
	}
}

func TestDeterministic(t *testing.T) {
	req := Request{
		Script: `
d = {}
for w in read_input("words").split(" "):
    d[w] = d.get(w, 0) + 1
print(d, set(d.keys()), hash("abc"), dir(math)[:3], 1 / 3, now)
write_file("out.json", json.encode(d))
`,
		Inputs: []Input{input("words", "b a c a b a z y x")},
		Now:    time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC),
	}
	first := mustRun(t, req)
	for range 20 {
		if again := mustRun(t, req); !reflect.DeepEqual(again, first) {
			t.Fatalf("Result = %+v, then %+v", first, again)
		}
	}
}

func TestConcurrentRuns(t *testing.T) {
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Go(func() {
			res, err := pool.Run(context.Background(), Request{
				Script: fmt.Sprintf("print(%d * 2)\nwrite_file('f', json.encode([%d]))", i, i),
			})
			if err != nil || res.Output != fmt.Sprintf("%d\n", i*2) || string(res.Files[0].Data) != fmt.Sprintf("[%d]", i) {
				t.Errorf("run %d: %+v, %v", i, res, err)
			}
		})
	}
	wg.Wait()
}
