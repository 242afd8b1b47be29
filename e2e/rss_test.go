package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/turngate/turngate/internal/dbtest"
	"github.com/turngate/turngate/internal/e2etest"
	"github.com/turngate/turngate/internal/gqlclient"
	"github.com/turngate/turngate/internal/servertest"
	"github.com/turngate/turngate/server"
)

// rssPeak samples pid's RSS every few milliseconds until stopped and
// keeps the highest.
type rssPeak struct {
	peak atomic.Int64
	stop chan struct{}
	done chan struct{}
}

func samplePeak(pid int) *rssPeak {
	p := &rssPeak{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(p.done)
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for {
			if r := e2etest.ProcessRSS(pid); r > p.peak.Load() {
				p.peak.Store(r)
			}
			select {
			case <-p.stop:
				return
			case <-tick.C:
			}
		}
	}()
	return p
}

func (p *rssPeak) Stop() int64 {
	close(p.stop)
	<-p.done
	return p.peak.Load()
}

// startAttackTarget runs the real binary on a database of its own with
// no sandbox workers (the attacks here do not reach them), and returns it
// with its idle RSS once warmed up by a few ordinary requests.
func startAttackTarget(t *testing.T) (*e2etest.Replica, int64) {
	t.Helper()
	bin := e2etest.PlainBinary(t)
	dataDir, err := os.MkdirTemp("", "turngate-rss-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dataDir) })
	srv := e2etest.StartReplica(t, bin, "rss", dbtest.NewDB(t), dataDir, "TURNGATE_NO_RUNNER=true")
	c := &gqlclient.Client{URL: srv.Base + "/graphql", HTTP: servertest.HTTPClient}
	for range 20 {
		if _, err := c.Raw(context.Background(), gqlclient.Request{Query: `{ __typename }`}); err != nil {
			t.Fatal(err)
		}
	}
	return srv, e2etest.ProcessRSS(srv.Cmd.Process.Pid)
}

// startMemberAttackTarget is startAttackTarget with a client carrying
// email's envelope.
func startMemberAttackTarget(t *testing.T, email string) (*e2etest.Replica, *gqlclient.Client) {
	t.Helper()
	bin := e2etest.PlainBinary(t)
	w := e2etest.NewWorld(t, bin, "turngate-rss-")
	srv := w.Start(t, "rss", "TURNGATE_NO_RUNNER=true")
	c := w.Client(t, srv.Base, email)
	for range 20 {
		if _, err := c.Raw(context.Background(), gqlclient.Request{Query: `{ __typename }`}); err != nil {
			t.Fatal(err)
		}
	}
	return srv, c
}

// endlessBody yields n bytes of a JSON-looking body without holding them.
type endlessBody struct{ left int64 }

func (b *endlessBody) Read(p []byte) (int, error) {
	if b.left <= 0 {
		return 0, io.EOF
	}
	n := min(int64(len(p)), b.left)
	for i := range p[:n] {
		p[i] = 'x'
	}
	b.left -= n
	return int(n), nil
}

// oversizedPost sends an anonymous POST of a 100 MB body over a raw
// connection — declared by Content-Length, or chunked — and returns the
// status and body of the server's answer, which must come before the
// body is sent whole. The sender gives up on a write error (the server
// closed its side).
func oversizedPost(addr string, chunked bool) (int, []byte, error) {
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return 0, nil, err
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(60 * time.Second))
	const size = 100 << 20
	head := "POST /graphql HTTP/1.1\r\nHost: " + addr + "\r\nContent-Type: application/json\r\n"
	if chunked {
		head += "Transfer-Encoding: chunked\r\n\r\n"
	} else {
		head += fmt.Sprintf("Content-Length: %d\r\n\r\n", size)
	}
	sent := make(chan int64, 1)
	go func() {
		n, _ := conn.Write([]byte(head))
		total := int64(n)
		body := &endlessBody{left: size}
		buf := make([]byte, 64<<10)
		for {
			m, err := body.Read(buf)
			if err != nil {
				break
			}
			chunk := buf[:m]
			if chunked {
				chunk = append([]byte(fmt.Sprintf("%x\r\n", m)), append(chunk, "\r\n"...)...)
			}
			w, err := conn.Write(chunk)
			total += int64(w)
			if err != nil {
				break
			}
		}
		sent <- total
	}()
	res, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		return 0, nil, fmt.Errorf("no answer to an oversized body: %w", err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	conn.Close() // stop the sender
	if n := <-sent; n >= size {
		return 0, nil, fmt.Errorf("the whole %d-byte body was sent before the answer", n)
	}
	return res.StatusCode, raw, nil
}

// TestBodyAttackMemory: three anonymous 100 MB POSTs at once (which took
// the server to 1.4 GB when bodies were read whole) are each answered 413
// PAYLOAD_TOO_LARGE before their bodies are sent, declared or chunked,
// and the server's RSS stays under its idle RSS + 64 MiB.
func TestBodyAttackMemory(t *testing.T) {
	t.Parallel()
	srv, idle := startAttackTarget(t)
	addr := strings.TrimPrefix(srv.Base, "http://")
	peak := samplePeak(srv.Cmd.Process.Pid)
	var wg sync.WaitGroup
	for i := range 6 {
		wg.Go(func() {
			status, raw, err := oversizedPost(addr, i%2 == 1)
			if err != nil {
				t.Error(err)
				return
			}
			if status != http.StatusRequestEntityTooLarge {
				t.Errorf("HTTP %d, want 413: %s", status, raw)
				return
			}
			var out gqlclient.Response
			if err := json.Unmarshal(raw, &out); err != nil {
				t.Errorf("413 body is not a GraphQL response: %s", raw)
				return
			}
			if len(out.Errors) == 0 || out.Errors[0].Code() != "PAYLOAD_TOO_LARGE" || out.Errors[0].Extensions["retryable"] != false {
				t.Errorf("413 errors = %+v, want PAYLOAD_TOO_LARGE, not retryable", out.Errors)
			}
		})
	}
	wg.Wait()
	top := peak.Stop()
	fmt.Printf("body attack: 6 x 100 MB POSTs (3 declared, 3 chunked): idle RSS %d MiB, peak %d MiB (bound idle + 64 MiB)\n", idle>>20, top>>20)
	if top > idle+64<<20 {
		t.Fatalf("RSS peaked at %d MiB under the body attack, idle %d MiB", top>>20, idle>>20)
	}
}

// TestQueryCacheMemory: after 1,000 distinct valid query documents of
// the maximum size (which, held by an entry-bounded cache, kept hundreds
// of MiB), the server's RSS has grown by less than 64 MiB; a document one
// byte over the limit is PAYLOAD_TOO_LARGE.
func TestQueryCacheMemory(t *testing.T) {
	t.Parallel()
	srv, idle := startAttackTarget(t)
	c := &gqlclient.Client{URL: srv.Base + "/graphql", HTTP: servertest.HTTPClient}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const max = server.DefaultMaxQuery
	// Three shapes, each exactly max bytes and distinct by i: a long
	// alias, a long string argument and a long comment. Each validates,
	// runs no resolver of ours, and is cached under its text.
	query := func(i int) string {
		pad := func(prefix, suffix string) string {
			return prefix + strings.Repeat("x", max-len(prefix)-len(suffix)) + suffix
		}
		switch tag := fmt.Sprintf("q%d", i); i % 3 {
		case 0:
			return pad("{ "+tag, ": __typename }")
		case 1:
			return pad(`{ __type(name: "`+tag, `") { name } }`)
		default:
			return pad("{ __typename } # "+tag+" ", "")
		}
	}
	peak := samplePeak(srv.Cmd.Process.Pid)
	next := atomic.Int64{}
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for i := int(next.Add(1)) - 1; i < 1000; i = int(next.Add(1)) - 1 {
				q := query(i)
				if len(q) != max {
					t.Errorf("query %d is %d bytes", i, len(q))
					return
				}
				res, err := c.Raw(ctx, gqlclient.Request{Query: q})
				if err != nil || len(res.Errors) != 0 {
					t.Errorf("query %d: %v %v", i, err, res)
					return
				}
			}
		})
	}
	wg.Wait()
	top := peak.Stop()
	after := e2etest.ProcessRSS(srv.Cmd.Process.Pid)
	fmt.Printf("query cache: 1,000 distinct %d-byte documents: idle RSS %d MiB, after %d MiB, peak %d MiB (bound idle + 64 MiB)\n", max, idle>>20, after>>20, top>>20)
	if after > idle+64<<20 {
		t.Fatalf("RSS grew by %d MiB after 1,000 maximum-size documents", (after-idle)>>20)
	}
	over := query(0) + " "
	res, err := c.Raw(ctx, gqlclient.Request{Query: over})
	if err != nil {
		t.Fatal(err)
	}
	servertest.CheckCoded(t, res.Errors, "PAYLOAD_TOO_LARGE")
	var sentinel = []byte(over[:40])
	raw, _ := json.Marshal(res.Errors)
	if bytes.Contains(raw, sentinel) {
		t.Fatal("the refusal quotes the document")
	}
}
