package main

import (
	"debug/elf"
	"net/http"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/turngate/turngate/authority"
	"github.com/turngate/turngate/internal/dbtest"
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
	bin := filepath.Join(dir, "turngate")
	build := exec.Command("go", "build", "-trimpath", "-o", bin, ".")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("CGO_ENABLED=0 go build: %v\n%s", err, out)
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
	base, err := readAddress(stdout)
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
