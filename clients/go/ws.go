package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/Khan/genqlient/graphql"
	"github.com/coder/websocket"
)

// wsTransport is a graphql-transport-ws connection for genqlient's
// generated subscriptions (graphql.WebSocketClient), written to the
// protocol (https://github.com/enisdenjo/graphql-ws/blob/master/PROTOCOL.md):
// it answers the server's pings, so a subscription lives for hours; it
// treats a complete for an id it already completed as nothing; it closes
// each subscription's channel exactly once, after the last value was
// delivered, so Unsubscribe never races a delivery. The identity envelope
// travels in the upgrade request's header, never in connection_init.
//
// A channel that a generated function returned must be read until it is
// closed: deliveries block until they are read.
type wsTransport struct {
	url    string
	header http.Header
	dial   *websocket.DialOptions

	conn  *websocket.Conn
	errs  chan error
	pings *atomic.Int64 // counts the pings answered; may be nil

	mu     sync.Mutex
	subs   map[string]*wsSub
	nextID int
	err    error // why the connection ended, when the server or network ended it
	closed bool
}

// wsSub is one subscription: a queue its own goroutine forwards to the
// generated channel, which that goroutine alone closes, after done and
// once the queue is empty. The queue is never closed, so a delivery can
// never meet a closed channel.
type wsSub struct {
	queue chan json.RawMessage
	done  chan struct{}
	once  sync.Once
}

// deliver queues raw, unless the subscription ended.
func (s *wsSub) deliver(raw json.RawMessage) {
	select {
	case s.queue <- raw:
	case <-s.done:
	}
}

func (s *wsSub) end() { s.once.Do(func() { close(s.done) }) }

// forward hands the queue to the generated channel until the
// subscription ends and the queue is empty, then closes the channel.
func (s *wsSub) forward(ch interface{}, fwd graphql.ForwardDataFunction, fail func(error)) {
	defer reflect.ValueOf(ch).Close()
	send := func(raw json.RawMessage) {
		if err := fwd(ch, raw); err != nil {
			fail(err)
		}
	}
	for {
		select {
		case raw := <-s.queue:
			send(raw)
		case <-s.done:
			for {
				select {
				case raw := <-s.queue:
					send(raw)
				default:
					return
				}
			}
		}
	}
}

type wsMessage struct {
	ID      string          `json:"id,omitempty"`
	Type    string          `json:"type"`
	Payload json.RawMessage `json:"payload,omitempty"`
}

var _ graphql.WebSocketClient = (*wsTransport)(nil)

func newWSTransport(url string, header http.Header, httpClient *http.Client) *wsTransport {
	// A WebSocket outlives any request timeout: the dial's context bounds
	// the handshake instead.
	hc := *httpClient
	hc.Timeout = 0
	httpClient = &hc
	return &wsTransport{url: url, header: header, dial: &websocket.DialOptions{
		HTTPClient:   httpClient,
		HTTPHeader:   header,
		Subprotocols: []string{"graphql-transport-ws"},
	}, subs: map[string]*wsSub{}}
}

// Start dials, initialises and waits for the server's acknowledgement.
func (t *wsTransport) Start(ctx context.Context) (chan error, error) {
	conn, _, err := websocket.Dial(ctx, t.url, t.dial)
	if err != nil {
		return nil, err
	}
	conn.SetReadLimit(16 << 20)
	t.conn = conn
	t.errs = make(chan error, 1)
	if err := t.write(ctx, wsMessage{Type: "connection_init", Payload: json.RawMessage(`{}`)}); err != nil {
		conn.CloseNow()
		return nil, err
	}
	for {
		var m wsMessage
		if err := t.read(ctx, &m); err != nil {
			conn.CloseNow()
			return nil, err
		}
		switch m.Type {
		case "connection_ack":
			go t.readLoop()
			return t.errs, nil
		case "ping":
			if err := t.write(ctx, wsMessage{Type: "pong"}); err != nil {
				conn.CloseNow()
				return nil, err
			}
		case "pong":
		default:
			conn.CloseNow()
			return nil, fmt.Errorf("graphql-transport-ws: %q before connection_ack", m.Type)
		}
	}
}

func (t *wsTransport) write(ctx context.Context, m wsMessage) error {
	data, err := json.Marshal(m)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	return t.conn.Write(ctx, websocket.MessageText, data)
}

func (t *wsTransport) read(ctx context.Context, m *wsMessage) error {
	_, data, err := t.conn.Read(ctx)
	if err != nil {
		return err
	}
	return json.Unmarshal(data, m)
}

// readLoop dispatches the server's messages until the connection ends.
func (t *wsTransport) readLoop() {
	ctx := context.Background()
	for {
		var m wsMessage
		if err := t.read(ctx, &m); err != nil {
			t.fail(err)
			return
		}
		switch m.Type {
		case "next":
			if s := t.sub(m.ID); s != nil {
				s.deliver(m.Payload)
			}
		case "error":
			// The payload is a list of GraphQL errors; deliver it as a
			// response's errors, then the subscription is over.
			if s := t.take(m.ID); s != nil {
				s.deliver(json.RawMessage(`{"errors":` + string(m.Payload) + `}`))
				s.end()
			}
		case "complete":
			if s := t.take(m.ID); s != nil {
				s.end()
			}
		case "ping":
			if err := t.write(ctx, wsMessage{Type: "pong"}); err != nil {
				t.fail(err)
				return
			}
			if t.pings != nil {
				t.pings.Add(1)
			}
		case "pong":
		default:
			t.fail(fmt.Errorf("graphql-transport-ws: unexpected %q", m.Type))
			return
		}
	}
}

func (t *wsTransport) sub(id string) *wsSub {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.subs[id]
}

func (t *wsTransport) take(id string) *wsSub {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := t.subs[id]
	delete(t.subs, id)
	return s
}

// fail ends the connection and every subscription on it with err (nil
// when Close ended it).
func (t *wsTransport) fail(err error) {
	t.mu.Lock()
	if !t.closed && t.err == nil && err != nil {
		t.err = err
		select {
		case t.errs <- err:
		default:
		}
	}
	subs := t.subs
	t.subs = map[string]*wsSub{}
	t.mu.Unlock()
	for _, s := range subs {
		s.end()
	}
	t.conn.CloseNow()
}

// Err is why the connection ended, when the server or the network ended
// it; nil while it is open or after Close.
func (t *wsTransport) Err() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.err
}

// Subscribe starts an operation; data arrives on interfaceChan through
// forward, which only this subscription's goroutine calls.
func (t *wsTransport) Subscribe(req *graphql.Request, interfaceChan interface{}, forward graphql.ForwardDataFunction) (string, error) {
	payload, err := json.Marshal(req)
	if err != nil {
		return "", err
	}
	t.mu.Lock()
	if t.closed || t.err != nil {
		t.mu.Unlock()
		return "", errors.Join(errors.New("graphql-transport-ws: connection ended"), t.err)
	}
	t.nextID++
	id := strconv.Itoa(t.nextID)
	s := &wsSub{queue: make(chan json.RawMessage, 64), done: make(chan struct{})}
	t.subs[id] = s
	t.mu.Unlock()
	go s.forward(interfaceChan, forward, t.fail)
	if err := t.write(context.Background(), wsMessage{ID: id, Type: "subscribe", Payload: payload}); err != nil {
		t.fail(err)
		return "", err
	}
	return id, nil
}

// Unsubscribe completes an operation: the server is told, and its channel
// closes once what was already received is delivered.
func (t *wsTransport) Unsubscribe(id string) error {
	s := t.take(id)
	if s == nil {
		return nil
	}
	s.end()
	if t.Err() != nil {
		return nil
	}
	return t.write(context.Background(), wsMessage{ID: id, Type: "complete"})
}

// Close ends the connection; every channel closes.
func (t *wsTransport) Close() error {
	t.mu.Lock()
	already := t.closed
	t.closed = true
	t.mu.Unlock()
	if already || t.conn == nil {
		return nil
	}
	err := t.conn.Close(websocket.StatusNormalClosure, "")
	t.fail(nil)
	close(t.errs)
	return err
}
