package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/turngate/turngate/internal/e2etest"
)

// frontDoor is one address in front of a world's replicas, as a load
// balancer would be: each new connection goes to the first replica that
// accepts it, so every client is on the same replica until that one dies,
// and then on the next. It streams SSE as it arrives and passes WebSocket
// upgrades through. Its control endpoints let a test in another process
// (the TypeScript client's tests) kill, restart and add replicas, and
// drop every client connection, the way a network would.
type frontDoor struct {
	t     *testing.T
	world *e2etest.World
	env   []string
	base  string // the front door's address, e.g. http://127.0.0.1:1234
	ctl   string // the control server's address

	mu       sync.Mutex
	replicas []*e2etest.Replica
	seq      int
	conns    map[net.Conn]bool
}

// newFrontDoor starts n replicas of w (with env) behind one address.
func newFrontDoor(t *testing.T, w *e2etest.World, n int, env ...string) *frontDoor {
	t.Helper()
	f := &frontDoor{t: t, world: w, env: env, conns: map[net.Conn]bool{}}
	for range n {
		f.add()
	}
	dial := func(ctx context.Context, _, _ string) (net.Conn, error) {
		f.mu.Lock()
		reps := append([]*e2etest.Replica(nil), f.replicas...)
		f.mu.Unlock()
		var errs []error
		for _, r := range reps {
			c, err := (&net.Dialer{Timeout: time.Second}).DialContext(ctx, "tcp", strings.TrimPrefix(r.Base, "http://"))
			if err == nil {
				return c, nil
			}
			errs = append(errs, err)
		}
		return nil, fmt.Errorf("no replica accepts: %w", errors.Join(errs...))
	}
	proxy := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(&url.URL{Scheme: "http", Host: "replica"})
			r.Out.Host = r.In.Host // the page's own host, as a proxy keeps it
		},
		Transport:     &http.Transport{DialContext: dial, DisableKeepAlives: true},
		FlushInterval: -1,
		// A replica killed mid-stream cuts the body the proxy copies:
		// that is the fault these tests inject, not news for the log.
		ErrorLog: log.New(io.Discard, "", 0),
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			http.Error(w, err.Error(), http.StatusBadGateway)
		},
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	// Full duplex: by default Go's HTTP/1 server closes a request's body
	// once the handler starts its response, and the proxy's transport,
	// still checking the body for bytes past its length when a stream's
	// first event arrives, would then fail the request and cut the stream.
	fullDuplex := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.NewResponseController(w).EnableFullDuplex()
		proxy.ServeHTTP(w, r)
	})
	srv := &http.Server{Handler: fullDuplex, ConnState: func(c net.Conn, s http.ConnState) {
		f.mu.Lock()
		defer f.mu.Unlock()
		switch s {
		case http.StateNew:
			f.conns[c] = true
		case http.StateClosed:
			// A hijacked (upgraded) connection stays listed: drop
			// closes WebSockets too.
			delete(f.conns, c)
		}
	}}
	// One request per connection, as the transport to the replicas has:
	// when a replica dies mid-request, the proxy can return while its
	// transport still reads the request's body, and a kept-alive
	// connection would then read the next request concurrently (Go's
	// server panics on that, "invalid concurrent Body.Read call").
	srv.SetKeepAlivesEnabled(false)
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	f.base = "http://" + ln.Addr().String()

	ctl := http.NewServeMux()
	ctl.HandleFunc("POST /drop", func(w http.ResponseWriter, r *http.Request) { f.drop(); w.WriteHeader(http.StatusNoContent) })
	ctl.HandleFunc("POST /failover", func(w http.ResponseWriter, r *http.Request) { f.killFirst(); w.WriteHeader(http.StatusNoContent) })
	ctl.HandleFunc("POST /restart", func(w http.ResponseWriter, r *http.Request) {
		f.killAll(r.URL.Query().Get("signal") == "term")
		f.add()
		w.WriteHeader(http.StatusNoContent)
	})
	ctl.HandleFunc("POST /down", func(w http.ResponseWriter, r *http.Request) { f.killAll(false); w.WriteHeader(http.StatusNoContent) })
	ctl.HandleFunc("POST /up", func(w http.ResponseWriter, r *http.Request) { f.add(); w.WriteHeader(http.StatusNoContent) })
	ctl.HandleFunc("GET /token", func(w http.ResponseWriter, r *http.Request) {
		tok, err := e2etest.TokenFor(f.world.Bin, f.world.DataDir, r.URL.Query().Get("email"))
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		json.NewEncoder(w).Encode(tok)
	})
	cln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	csrv := &http.Server{Handler: ctl}
	go csrv.Serve(cln)
	t.Cleanup(func() { csrv.Close() })
	f.ctl = "http://" + cln.Addr().String()
	return f
}

// add starts one more replica, last in the order connections try.
func (f *frontDoor) add() *e2etest.Replica {
	f.mu.Lock()
	f.seq++
	name := fmt.Sprintf("r%d", f.seq)
	f.mu.Unlock()
	r := f.world.Start(f.t, name, f.env...)
	f.mu.Lock()
	f.replicas = append(f.replicas, r)
	f.mu.Unlock()
	return r
}

// killFirst kills -9 the replica new connections go to now (the one
// serving every client) and takes it out of the order.
func (f *frontDoor) killFirst() {
	f.mu.Lock()
	if len(f.replicas) == 0 {
		f.mu.Unlock()
		return
	}
	r := f.replicas[0]
	f.replicas = f.replicas[1:]
	f.mu.Unlock()
	r.Kill9(f.t)
}

// killAll kills every replica: with SIGKILL, or with SIGTERM (an orderly
// stop: streams end with UNAVAILABLE) when term is set.
func (f *frontDoor) killAll(term bool) {
	f.mu.Lock()
	reps := f.replicas
	f.replicas = nil
	f.mu.Unlock()
	for _, r := range reps {
		if term {
			r.Cmd.Process.Signal(syscall.SIGTERM)
			r.Cmd.Wait()
			continue
		}
		r.Kill9(f.t)
	}
}

// drop closes every client connection to the front door, as a network
// that drops would.
func (f *frontDoor) drop() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for c := range f.conns {
		c.Close()
		delete(f.conns, c)
	}
}
