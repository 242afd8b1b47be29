package server_test

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/turngate/turngate/internal/dbtest"
	"github.com/turngate/turngate/internal/servertest"
	"github.com/turngate/turngate/server"
)

// outsideIP is an IPv4 address of this machine that is not loopback, so
// a test can reach a listener from a peer that is not loopback; nil when
// the machine has none.
func outsideIP() net.IP {
	ifaces, err := net.Interfaces()
	if err != nil {
		return nil
	}
	for _, ifc := range ifaces {
		if ifc.Flags&net.FlagUp == 0 || ifc.Flags&net.FlagLoopback != 0 {
			continue
		}
		addrs, err := ifc.Addrs()
		if err != nil {
			continue
		}
		for _, a := range addrs {
			if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && n.IP.IsGlobalUnicast() {
				return n.IP.To4()
			}
		}
	}
	return nil
}

// TestDevPageOnlyForLoopbackPeer: the dev pages carry envelopes only for
// a request whose peer is loopback and whose Host is a loopback name (DNS
// rebinding), and that came through no proxy (whose own peer is unknown).
// A peer elsewhere that sends Host: localhost gets the plain page — first
// at the handler, with crafted peers, then through a real listener on
// every interface, reached from this machine's non-loopback address.
func TestDevPageOnlyForLoopbackPeer(t *testing.T) {
	t.Parallel()
	signedIn := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "signed-in") })
	plain := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "plain") })
	h := server.LoopbackOnly(signedIn, plain)
	for _, tt := range []struct {
		peer, host string
		header     http.Header
		want       string
	}{
		{"127.0.0.1:40000", "localhost:8080", nil, "signed-in"},
		{"127.0.0.2:40000", "127.0.0.1:8080", nil, "signed-in"},
		{"[::1]:40000", "[::1]:8080", nil, "signed-in"},
		{"[::ffff:127.0.0.1]:40000", "localhost", nil, "signed-in"},
		{"192.0.2.7:40000", "localhost:8080", nil, "plain"},
		{"10.0.0.1:40000", "127.0.0.1:8080", nil, "plain"},
		{"[2001:db8::1]:40000", "[::1]:8080", nil, "plain"},
		{"[::]:40000", "localhost", nil, "plain"},
		{"0.0.0.0:40000", "localhost", nil, "plain"},
		{"", "localhost", nil, "plain"},
		{"not an address", "localhost", nil, "plain"},
		{"127.0.0.1:40000", "rebound.example", nil, "plain"},
		{"127.0.0.1:40000", "localhost", http.Header{"X-Forwarded-For": {"192.0.2.7"}}, "plain"},
		{"127.0.0.1:40000", "localhost", http.Header{"Forwarded": {"for=192.0.2.7"}}, "plain"},
		{"127.0.0.1:40000", "localhost", http.Header{"X-Real-Ip": {"192.0.2.7"}}, "plain"},
	} {
		req := httptest.NewRequest(http.MethodGet, "/", nil)
		req.RemoteAddr, req.Host = tt.peer, tt.host
		for k, v := range tt.header {
			req.Header[k] = v
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if got := rec.Body.String(); got != tt.want {
			t.Errorf("peer %q, Host %q, %v: %s, want %s", tt.peer, tt.host, tt.header, got, tt.want)
		}
	}

	ip := outsideIP()
	if ip == nil {
		t.Log("this machine has no non-loopback address: the real-listener half cannot run")
		return
	}
	srv := servertest.New(t, func(c *server.Config) { c.Addr, c.DevAllowPublicListener = "0.0.0.0:0", true })
	_, port, err := net.SplitHostPort(srv.App.Addr())
	if err != nil {
		t.Fatal(err)
	}
	page := func(from net.IP, dialHost, host, path string) string {
		t.Helper()
		client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
			DialContext: (&net.Dialer{LocalAddr: &net.TCPAddr{IP: from}}).DialContext,
		}}
		req, err := http.NewRequest(http.MethodGet, "http://"+net.JoinHostPort(dialHost, port)+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Host = host
		res, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		raw, _ := io.ReadAll(res.Body)
		if res.StatusCode != http.StatusOK {
			t.Fatalf("GET %s from %s: HTTP %d", path, from, res.StatusCode)
		}
		return string(raw)
	}
	for _, path := range []string{"/", "/graphiql/"} {
		if !strings.Contains(page(net.IPv4(127, 0, 0, 1), "127.0.0.1", "localhost:"+port, path), "eyJ") {
			t.Errorf("%s from loopback: no envelope in the dev page", path)
		}
		for _, host := range []string{"localhost:" + port, "127.0.0.1:" + port, "localhost"} {
			if strings.Contains(page(ip, ip.String(), host, path), "eyJ") {
				t.Errorf("%s from %s with Host %s: the page carries an envelope", path, ip, host)
			}
		}
	}
}

// TestDevModeRefusesNonLoopbackListener: dev mode does not start on an
// address other hosts can reach unless TURNGATE_DEV_ALLOW_PUBLIC_LISTENER
// says so, and the refusal says what to do; a loopback address, the
// explicit setting, or a platform key (not dev mode) start.
func TestDevModeRefusesNonLoopbackListener(t *testing.T) {
	t.Parallel()
	public := []string{"0.0.0.0:8080", "[::]:8080", ":8080", "192.0.2.7:8080", "[2001:db8::1]:8080"}
	for _, addr := range public {
		cfg := server.Config{Addr: addr}
		err := cfg.Check()
		if err == nil {
			t.Errorf("dev mode on %s: Check passes", addr)
			continue
		}
		for _, want := range []string{"TURNGATE_DEV_ALLOW_PUBLIC_LISTENER=yes-i-understand", "TURNGATE_ENVELOPE_PUBLIC_KEY", "TURNGATE_ENVELOPE_JWKS_URL", "127.0.0.1"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("dev mode on %s: %q does not say %s", addr, err, want)
			}
		}
		for _, ok := range []server.Config{
			{Addr: addr, DevAllowPublicListener: true},
			{Addr: addr, EnvelopeKeyFile: "/platform.pem"},
			{Addr: addr, EnvelopeJWKSURL: "https://idp.example/jwks"},
		} {
			if err := ok.Check(); err != nil {
				t.Errorf("%+v: %v", ok, err)
			}
		}
	}
	for _, addr := range []string{"127.0.0.1:8080", "127.0.0.1:0", "[::1]:8080", "localhost:8080"} {
		if err := (server.Config{Addr: addr}).Check(); err != nil {
			t.Errorf("dev mode on %s: %v", addr, err)
		}
	}

	// Check reads the address as written; Listen checks the address the
	// listener is bound to (a name that resolves elsewhere, or a server
	// wired without Check).
	ip := outsideIP()
	if ip == nil {
		t.Log("this machine has no non-loopback address: the Listen half cannot run")
		return
	}
	cfg := servertest.Config(filepath.Join(t.TempDir(), "data"), dbtest.NewDB(t), "test-"+t.Name())
	cfg.Addr = net.JoinHostPort(ip.String(), "0")
	app, err := server.New(context.Background(), cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer app.Close()
	if err := app.Listen(); err == nil {
		server.ListenerOf(app).Close()
		t.Fatalf("dev mode listens on %s", app.Addr())
	} else if !strings.Contains(err.Error(), "TURNGATE_DEV_ALLOW_PUBLIC_LISTENER") {
		t.Errorf("the refusal does not name the setting: %v", err)
	}
}

// TestDevAllowPublicListenerIsExplicit: the setting takes one value,
// spelled out; anything else is refused rather than read as consent.
func TestDevAllowPublicListenerIsExplicit(t *testing.T) {
	for _, tt := range []struct {
		value   string
		allowed bool
		err     bool
	}{
		{"", false, false},
		{"yes-i-understand", true, false},
		{"true", false, true},
		{"1", false, true},
		{"yes", false, true},
	} {
		t.Setenv("TURNGATE_DEV_ALLOW_PUBLIC_LISTENER", tt.value)
		cfg, err := server.ConfigFromEnv()
		if (err != nil) != tt.err || cfg.DevAllowPublicListener != tt.allowed {
			t.Errorf("%q: allowed %v, err %v; want allowed %v, an error %v", tt.value, cfg.DevAllowPublicListener, err, tt.allowed, tt.err)
		}
	}
}
