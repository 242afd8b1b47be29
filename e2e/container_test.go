package e2e

import (
	"bufio"
	"debug/elf"
	"encoding/json"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/turngate/turngate/authority"
	"github.com/turngate/turngate/internal/dbtest"
	"github.com/turngate/turngate/internal/e2etest"
	"github.com/turngate/turngate/internal/servertest"
	"github.com/turngate/turngate/server"
)

// TestStaticBuildRunsAsNonRootOnExternalDatabase is what the Dockerfile
// ships, short of the image: the binary built with CGO off is static (no
// ELF interpreter), and run as an unprivileged user (nobody, as the
// image's user) against an external DATABASE_URL with its data folder on
// a volume it owns, it migrates, serves and reports ready.
func TestStaticBuildRunsAsNonRootOnExternalDatabase(t *testing.T) {
	t.Parallel()
	dir, err := os.MkdirTemp("", "turngate-static-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	os.Chmod(dir, 0o755)
	// The tier's plain binary is built as the Dockerfile builds it
	// (CGO_ENABLED=0 go build -trimpath); a copy goes where nobody may
	// run it.
	bin := filepath.Join(dir, "turngate")
	raw, err := os.ReadFile(e2etest.PlainBinary(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, raw, 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Fatal("the CGO-off binary has an ELF interpreter: it is not static")
		}
	}
	f.Close()

	data := filepath.Join(dir, "data") // the image's volume
	if err := os.Mkdir(data, 0o700); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "serve", "--addr", "127.0.0.1:0")
	cmd.Env = append(os.Environ(), "DATABASE_URL="+dbtest.NewDB(t), "TURNGATE_DATA="+data, "TURNGATE_LOG_LEVEL=warn")
	uid := os.Geteuid()
	if uid == 0 {
		// As root (CI), drop to nobody, as the image's USER does.
		u, err := user.Lookup("nobody")
		if err != nil {
			t.Fatal(err)
		}
		nuid, _ := strconv.Atoi(u.Uid)
		ngid, _ := strconv.Atoi(u.Gid)
		if err := os.Chown(data, nuid, ngid); err != nil {
			t.Fatal(err)
		}
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(nuid), Gid: uint32(ngid)}}
		uid = nuid
	}
	if uid == 0 {
		t.Fatal("the server would run as root")
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Signal(syscall.SIGTERM); cmd.Wait() })
	base, err := e2etest.ReadAddress(stdout)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		res, err := http.Get(base + "/readyz")
		if err == nil {
			res.Body.Close()
			if res.StatusCode == http.StatusOK {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz never answered 200 (last: %v)", err)
		}
		select {
		case <-time.After(50 * time.Millisecond):
		case <-t.Context().Done():
			t.Fatal(t.Context().Err())
		}
	}
	// What it wrote on the volume (the dev key) is its user's.
	st, err := os.Stat(filepath.Join(data, authority.DevKeyFile))
	if err != nil {
		t.Fatal(err)
	}
	if sys, ok := st.Sys().(*syscall.Stat_t); !ok || int(sys.Uid) != uid {
		t.Fatalf("the data folder's key is not owned by the server's user %d", uid)
	}
}

// imageConfig reads the Dockerfile's final stage: its ENV settings and
// its CMD, as the image starts the binary.
func imageConfig(t *testing.T) (env map[string]string, cmd []string) {
	t.Helper()
	raw, err := os.ReadFile("../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	text := strings.ReplaceAll(string(raw), "\\\n", " ")
	env = map[string]string{}
	for _, line := range strings.Split(text, "\n") {
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		switch strings.ToUpper(fields[0]) {
		case "FROM":
			env, cmd = map[string]string{}, nil // a new stage
		case "ENV":
			for _, kv := range fields[1:] {
				k, v, ok := strings.Cut(kv, "=")
				if !ok {
					t.Fatalf("Dockerfile: ENV %q is not KEY=VALUE", kv)
				}
				env[k] = strings.Trim(v, `"`)
			}
		case "CMD":
			if err := json.Unmarshal([]byte(strings.TrimSpace(strings.TrimPrefix(line, fields[0]))), &cmd); err != nil {
				t.Fatalf("Dockerfile: CMD is not a JSON array: %v", err)
			}
		}
	}
	if env["TURNGATE_ADDR"] == "" || len(cmd) == 0 {
		t.Fatalf("Dockerfile: no TURNGATE_ADDR or no CMD in the final stage (%v, %v)", env, cmd)
	}
	return env, cmd
}

// TestImageDoesNotStartInDevMode: the image's settings (its address on
// every interface, its data volume) without an identity key would be dev
// mode — embedded envelopes for the demo's operator — so the binary
// refuses to start, saying what to set; with a platform key the same
// settings serve.
func TestImageDoesNotStartInDevMode(t *testing.T) {
	t.Parallel()
	bin := e2etest.Binary(t)
	env, args := imageConfig(t)
	host, _, err := net.SplitHostPort(env["TURNGATE_ADDR"])
	if err != nil {
		t.Fatal(err)
	}
	if ip := net.ParseIP(host); host != "" && (ip == nil || !ip.IsUnspecified()) {
		t.Fatalf("the image listens on %s, not on every interface: this test expects the image's usual address", env["TURNGATE_ADDR"])
	}
	// started is one run of the binary: its stderr, its address once it
	// serves, and its exit.
	type started struct {
		stderr  *servertest.SyncBuffer
		serving chan string
		exited  chan struct{}
		err     error // once exited is closed
	}
	start := func(extra ...string) *started {
		cmd := exec.Command(bin, args...)
		cmd.Env = append(e2etest.CleanEnv(), "DATABASE_URL="+dbtest.NewDB(t), "TURNGATE_LOG_LEVEL=warn")
		for k, v := range env {
			switch k {
			case "TURNGATE_ADDR":
				v = net.JoinHostPort(host, "0") // the image's address, on a free port
			case "TURNGATE_DATA":
				v = t.TempDir() // the image's volume
			}
			cmd.Env = append(cmd.Env, k+"="+v)
		}
		cmd.Env = append(cmd.Env, extra...)
		p := &started{stderr: &servertest.SyncBuffer{}, serving: make(chan string, 1), exited: make(chan struct{})}
		cmd.Stderr = p.stderr
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		// Read to the end (the pipe closes when the binary exits), so no
		// goroutine outlives the test.
		go func() {
			sc := bufio.NewScanner(stdout)
			for sc.Scan() {
				if rest, ok := strings.CutPrefix(sc.Text(), "turngate is serving the chat at "); ok {
					base, _, _ := strings.Cut(rest, " ")
					select {
					case p.serving <- strings.TrimSuffix(base, "/"):
					default:
					}
				}
			}
		}()
		go func() { p.err = cmd.Wait(); close(p.exited) }()
		t.Cleanup(func() {
			cmd.Process.Signal(syscall.SIGTERM)
			<-p.exited
		})
		return p
	}

	dev := start()
	select {
	case base := <-dev.serving:
		t.Fatalf("the image's settings without an identity key serve dev mode at %s", base)
	case <-dev.exited:
		if dev.err == nil {
			t.Fatal("the binary exited 0 on the image's settings without an identity key")
		}
		for _, want := range []string{"TURNGATE_ENVELOPE_PUBLIC_KEY", "TURNGATE_ENVELOPE_JWKS_URL", "TURNGATE_DEV_ALLOW_PUBLIC_LISTENER"} {
			if !strings.Contains(dev.stderr.String(), want) {
				t.Errorf("the refusal does not name %s: %s", want, dev.stderr)
			}
		}
	case <-time.After(90 * time.Second):
		t.Fatalf("the binary neither served nor refused: %s", dev.stderr)
	}

	key, _ := servertest.PlatformKey(t, server.DevIssuer, server.DevAudience)
	prod := start("TURNGATE_ENVELOPE_PUBLIC_KEY=" + key)
	select {
	case base := <-prod.serving:
		_, port, _ := net.SplitHostPort(strings.TrimPrefix(base, "http://"))
		res, err := http.Get("http://127.0.0.1:" + port + "/healthz")
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != http.StatusOK {
			t.Fatalf("/healthz: HTTP %d", res.StatusCode)
		}
	case <-prod.exited:
		t.Fatalf("with a platform key the image's settings do not serve: %v\n%s", prod.err, prod.stderr)
	case <-time.After(90 * time.Second):
		t.Fatalf("with a platform key the binary never served: %s", prod.stderr)
	}
}
