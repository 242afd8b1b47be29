package server

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"reflect"
	"strconv"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/99designs/gqlgen/graphql/handler/transport"
	"github.com/vektah/gqlparser/v2/gqlerror"

	"github.com/turngate/turngate/authority"
	"github.com/turngate/turngate/errcode"
	"github.com/turngate/turngate/graph/extension"
	"github.com/turngate/turngate/metrics"
)

// This file holds what gqlgen's WebSocket transport leaves out of the
// graphql-transport-ws protocol
// (https://github.com/enisdenjo/graphql-ws/blob/master/PROTOCOL.md), and
// the per-member bound on open streams:
//
//   - wsLimits accepts only graphql-transport-ws (4406 otherwise) and
//     wraps every socket in a wsConn, which reads each client message
//     before gqlgen does. It closes with 4408 when connection_init is
//     late, with 4409 on a subscribe whose id is still active (and with
//     the spec's 4400, 4401 and 4429 on a message that does not decode, a
//     subscribe before connection_init, a second connection_init, where
//     gqlgen would send 1002). It answers a subscribe past
//     Limits.MaxSubscriptions with an `error` (RATE_LIMITED), and one
//     that is not valid UTF-8 or escapes a lone surrogate with an `error`
//     (BAD_USER_INPUT); those never reach gqlgen, so nothing runs.
//   - A socket whose upgrade carried no valid identity envelope runs
//     nothing: its connection_init is acknowledged (so that the client
//     learns why), its first subscribe is answered with an `error`
//     (UNAUTHENTICATED, the envelope's precise failure) and the close
//     4401, and it is closed with 4401 once Limits.WSInitTimeout has
//     passed since its upgrade, subscribe or not: no operation reaches
//     gqlgen, it is never pinged, and pongs do not keep it open.
//   - streamSlots counts each member's WebSockets and SSE requests on this
//     replica and refuses one past Limits.MaxStreams with HTTP 429.
//
// gqlgen keys its running operations by the client's id and replaces one
// silently when an id is reused; and after a client's complete its
// goroutine still winds down and writes a complete of its own. So a
// wsConn renames ids: gqlgen only ever sees ids the wsConn made (never
// reused on a connection), the client only ever sees its own. That makes
// "active" exact on both sides: a client id is active from its subscribe
// until the client completes it or is sent its `error` or `complete`; a
// gqlgen id holds one of the connection's MaxSubscriptions slots until
// gqlgen writes its complete, which it does for every operation while the
// connection is open — after an error too. (transport.AddSubscriptionError
// would end an operation without a complete; nothing here uses it, and if
// something did its slot would stay taken: the bound fails closed.)

// The graphql-transport-ws subprotocol and the messages the wsConn reads.
const (
	wsSubprotocol = "graphql-transport-ws"
	wsInit        = "connection_init"
	wsSubscribe   = "subscribe"
	wsComplete    = "complete"
	wsError       = "error"
	wsPing        = "ping"
	wsPong        = "pong"
)

// Close codes of graphql-transport-ws the wsConn sends itself.
const (
	wsCloseBadRequest      = 4400 // "Invalid message received"
	wsCloseUnauthorized    = 4401 // a subscribe before connection_ack; no valid envelope; the envelope expired
	wsCloseSubprotocol     = 4406 // "Subprotocol not acceptable"
	wsCloseInitTimeout     = 4408 // "Connection initialisation timeout"
	wsCloseSubscriberExist = 4409 // "Subscriber for <id> already exists"
	wsCloseTooManyInits    = 4429 // a second connection_init
	wsCloseGoingAway       = 1001 // two pings went unanswered
)

// wsLimits is the transport.WebsocketImplementation of /graphql: gqlgen's
// coder/websocket adapter, with every connection wrapped in a wsConn.
type wsLimits struct {
	accept transport.CoderWebsocketImplementation
	// initTimeout bounds the wait for connection_init (Limits.WSInitTimeout),
	// and the whole life of a socket without a valid envelope. gqlgen's
	// own InitTimeout must stay zero: it closes with 1002.
	initTimeout time.Duration
	// maxSubscriptions bounds the operations running on one connection
	// (Limits.MaxSubscriptions).
	maxSubscriptions int
	// open are the connections open now, which an orderly stop closes.
	open *wsOpen
	// ping is how often the server pings an initialised connection
	// (Limits.WSPing); two pings without a pong close it.
	ping time.Duration
}

// wsOpen is the set of open graphql-transport-ws connections.
type wsOpen struct {
	mu    sync.Mutex
	conns map[*wsConn]struct{}
}

func (o *wsOpen) add(c *wsConn) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.conns == nil {
		o.conns = map[*wsConn]struct{}{}
	}
	o.conns[c] = struct{}{}
}

func (o *wsOpen) remove(c *wsConn) {
	o.mu.Lock()
	defer o.mu.Unlock()
	delete(o.conns, c)
}

// closeAll closes every open connection with code: an orderly stop's
// 1012 (service restart), after which a graphql-transport-ws client
// reconnects — elsewhere — and subscribes again, where a complete would
// have told it the subscriptions were over.
func (o *wsOpen) closeAll(code int, reason string) {
	o.mu.Lock()
	conns := make([]*wsConn, 0, len(o.conns))
	for c := range o.conns {
		conns = append(conns, c)
	}
	o.mu.Unlock()
	for _, c := range conns {
		c.closeWith(code, reason)
	}
}

// wsCloseServiceRestart is WebSocket's 1012: the server is restarting;
// the client may reconnect.
const wsCloseServiceRestart = 1012

var _ transport.WebsocketImplementation = wsLimits{}

func (l wsLimits) Accept(w http.ResponseWriter, r *http.Request, opts transport.WebsocketAcceptOptions) (transport.WebsocketConn, error) {
	// Only graphql-transport-ws: gqlgen would pick the legacy graphql-ws
	// protocol first when a client offers both (or none), and the rules
	// below are this protocol's.
	opts.Subprotocols = []string{wsSubprotocol}
	inner, err := l.accept.Accept(w, r, opts)
	if err != nil {
		return nil, err
	}
	c := &wsConn{
		inner:    inner,
		max:      l.maxSubscriptions,
		byClient: map[string]*wsOp{},
		byServer: map[string]*wsOp{},
		open:     l.open,
		every:    l.ping,
	}
	if l.open != nil {
		l.open.add(c)
	}
	if inner.Subprotocol() != wsSubprotocol {
		// What the graphql-ws reference server does; gqlgen's read of
		// connection_init then fails and it gives up.
		c.closeWith(wsCloseSubprotocol, "Subprotocol not acceptable")
		return c, nil
	}
	if _, ok := authority.IdentityFromContext(r.Context()); !ok {
		_, c.unauthenticated = authority.RequireIdentity(r.Context())
	}
	if until, ok := authority.ExpiresFromContext(r.Context()); ok {
		// The identity verified at the upgrade is the connection's; when
		// its envelope expires, the connection ends (4401), and the
		// client connects again with a fresh one.
		c.expiryTimer = time.AfterFunc(time.Until(until), func() {
			c.closeWith(wsCloseUnauthorized, "Unauthorized: identity envelope expired")
		})
	}
	c.initTimer = time.AfterFunc(l.initTimeout, func() {
		c.mu.Lock()
		late := !c.initialised && !c.closed
		c.closed = c.closed || late
		c.mu.Unlock()
		switch {
		case late:
			_ = c.inner.WriteClose(wsCloseInitTimeout, "Connection initialisation timeout")
		case c.unauthenticated != nil:
			// Its time is up: without an envelope it could only hold
			// a stream slot.
			c.closeUnauthenticated()
		}
	})
	return c, nil
}

// wsConn is one graphql-transport-ws connection as gqlgen sees it (see the
// top of this file). gqlgen calls NextReader from its one reading
// goroutine and WriteJSON under its own lock; the wsConn writes its own
// `error` messages from NextReader, which coder/websocket allows
// concurrently with gqlgen's writes.
type wsConn struct {
	inner     transport.WebsocketConn
	max       int
	initTimer *time.Timer
	// unauthenticated is why the upgrade carried no identity (the
	// envelope's failure, or none sent); nil for a member's socket.
	unauthenticated error
	// expiryTimer closes the connection when its envelope expires.
	expiryTimer *time.Timer
	// pingTimer pings the client every `every` once it is initialised; a
	// timer rather than a goroutine per connection, whose stack ten
	// thousand idle subscribers would pay for. unanswered counts the
	// pings sent since the last pong.
	every      time.Duration
	pingTimer  *time.Timer
	unanswered int
	// open is the registry the connection is in until Close.
	open *wsOpen

	mu          sync.Mutex
	initialised bool
	closed      bool             // the wsConn has sent a close frame
	byClient    map[string]*wsOp // active for the client, by client id
	byServer    map[string]*wsOp // running in gqlgen, by gqlgen id
	next        uint64           // the last gqlgen id handed out
}

// wsOp is one subscribe the wsConn passed on to gqlgen.
type wsOp struct {
	client, server string
	// ended: the client completed it or was sent its error; whatever
	// gqlgen still writes for it is dropped.
	ended bool
}

// wsMessage is a graphql-transport-ws message.
type wsMessage struct {
	ID      string          `json:"id,omitempty"`
	Type    string          `json:"type"`
	Payload json.RawMessage `json:"payload,omitempty"`
}

var (
	_ transport.WebsocketConn          = (*wsConn)(nil)
	_ transport.WebsocketReadLimiter   = (*wsConn)(nil)
	_ transport.WebsocketReadDeadliner = (*wsConn)(nil)
)

// errWSClosed ends gqlgen's read loop once the wsConn has closed the
// socket; gqlgen does not report net.ErrClosed.
var errWSClosed = fmt.Errorf("graphql-transport-ws: closed by the server: %w", net.ErrClosed)

// NextReader returns the next client message gqlgen should see. It reads
// each message the way gqlgen will (encoding/json's Decoder: the first
// value, keys matched without case), so what it checks is what gqlgen
// runs; subscribe and complete go on with gqlgen's id for the client's.
func (c *wsConn) NextReader() (int, io.Reader, error) {
	for {
		if c.isClosed() {
			return 0, nil, errWSClosed
		}
		typ, r, err := c.inner.NextReader()
		if err != nil {
			return typ, r, err
		}
		raw, err := io.ReadAll(r)
		if err != nil {
			return typ, nil, err
		}
		var m wsMessage
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.UseNumber()
		if err := dec.Decode(&m); err != nil {
			c.closeWith(wsCloseBadRequest, "Invalid message received")
			return 0, nil, errWSClosed
		}
		switch m.Type {
		case wsInit:
			c.mu.Lock()
			late, again := c.closed, c.initialised
			c.initialised = true
			c.mu.Unlock()
			if late {
				return 0, nil, errWSClosed // the init timer fired first
			}
			if again {
				c.closeWith(wsCloseTooManyInits, "Too many initialisation requests")
				return 0, nil, errWSClosed
			}
			if c.unauthenticated == nil {
				c.initTimer.Stop()
				c.startPings()
			}
		case wsPong:
			c.mu.Lock()
			c.unanswered = 0
			c.mu.Unlock()
		case wsSubscribe:
			c.mu.Lock()
			early := !c.initialised
			c.mu.Unlock()
			if early {
				// Spec: a subscribe before connection_ack closes with 4401.
				c.closeWith(wsCloseUnauthorized, "Unauthorized")
				return 0, nil, errWSClosed
			}
			if c.unauthenticated != nil {
				// Nothing runs without an identity: the client is told
				// why, for this operation and then for the socket.
				if err := c.refuse(m.ID, c.unauthenticated); err != nil {
					return 0, nil, err
				}
				c.closeUnauthenticated()
				return 0, nil, errWSClosed
			}
			out, ok, err := c.subscribe(m, raw)
			if err != nil {
				return 0, nil, err
			}
			if !ok {
				continue // answered here; gqlgen never sees it
			}
			raw = out
		case wsComplete:
			c.mu.Lock()
			op := c.byClient[m.ID]
			if op != nil {
				delete(c.byClient, m.ID)
				op.ended = true // spec: nothing more is sent for it
			}
			c.mu.Unlock()
			if op == nil {
				continue // nothing of the client's runs under that id
			}
			m.ID = op.server
			if raw, err = json.Marshal(m); err != nil {
				return 0, nil, err
			}
		}
		return typ, bytes.NewReader(raw), nil
	}
}

// closeUnauthenticated closes a socket without a valid envelope with
// 4401 and the envelope's failure.
func (c *wsConn) closeUnauthenticated() {
	c.closeWith(wsCloseUnauthorized, closeReason("Unauthorized: "+c.unauthenticated.Error()))
}

// startPings arms the connection's ping timer.
func (c *wsConn) startPings() {
	if c.every <= 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.pingTimer == nil && !c.closed {
		c.pingTimer = time.AfterFunc(c.every, c.pingNow)
	}
}

// pingNow sends a ping, or closes a connection whose last two pings went
// unanswered (1001: the peer is gone), and re-arms the timer.
func (c *wsConn) pingNow() {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return
	}
	dead := c.unanswered >= 2
	c.unanswered++
	c.mu.Unlock()
	if dead {
		c.closeWith(wsCloseGoingAway, "no pong")
		return
	}
	if err := c.inner.WriteJSON(wsMessage{Type: wsPing}); err != nil {
		return // the socket is gone; gqlgen's read ends the connection
	}
	c.mu.Lock()
	if !c.closed {
		c.pingTimer.Reset(c.every)
	}
	c.mu.Unlock()
}

// subscribe applies the protocol's and this server's rules to a subscribe
// message: it returns the message to pass on to gqlgen, or ok false when
// the wsConn answered it, or an error when it closed the socket.
func (c *wsConn) subscribe(m wsMessage, raw []byte) (out []byte, ok bool, err error) {
	c.mu.Lock()
	_, dup := c.byClient[m.ID]
	c.mu.Unlock()
	if dup {
		// Spec: "If there is already an active subscriber for an
		// operation matching the provided ID, ... the server must close
		// the socket immediately with 4409".
		c.closeWith(wsCloseSubscriberExist, closeReason("Subscriber for "+m.ID+" already exists"))
		return nil, false, errWSClosed
	}
	// Every string a client sends is checked once (DESIGN §10): gqlgen
	// would decode invalid UTF-8 and lone surrogates to U+FFFD and run
	// the operation.
	if err := extension.CheckRawJSON(raw); err != nil {
		return nil, false, c.refuse(m.ID, err)
	}
	c.mu.Lock()
	if len(c.byServer) >= c.max {
		c.mu.Unlock()
		return nil, false, c.refuse(m.ID, errcode.New(errcode.RateLimited,
			"too many subscriptions on this connection: at most %d run at once; complete one first", c.max))
	}
	c.next++
	op := &wsOp{client: m.ID, server: strconv.FormatUint(c.next, 10)}
	c.byClient[op.client] = op
	c.byServer[op.server] = op
	c.mu.Unlock()
	m.ID = op.server
	out, err = json.Marshal(m)
	return out, err == nil, err
}

// refuse sends the client an `error` for id: the operation ends there.
func (c *wsConn) refuse(id string, err error) error {
	e, _ := errcode.From(err)
	payload, merr := json.Marshal([]*gqlerror.Error{extension.Present(&gqlerror.Error{Message: e.Message}, e.Code, err)})
	if merr != nil {
		return merr
	}
	return c.inner.WriteJSON(wsMessage{ID: id, Type: wsError, Payload: payload})
}

// WriteJSON writes a message of gqlgen's with the client's id in place of
// gqlgen's, drops what gqlgen writes for an operation that has ended for
// the client, and frees an operation's slot on gqlgen's complete. The
// books are kept before the write, so a client that reuses an id as soon
// as it reads the end of the last one finds it free.
func (c *wsConn) WriteJSON(v any) error {
	if c.isClosed() {
		// The close frame is on its way (gqlgen's adapter writes it from
		// a goroutine): nothing may follow it, least of all a complete
		// that would tell the client its subscription is over.
		return errWSClosed
	}
	m, ok := outgoing(v)
	if !ok {
		data, err := json.Marshal(v)
		if err != nil {
			return err
		}
		if err := json.Unmarshal(data, &m); err != nil {
			return err
		}
	}
	if m.ID == "" {
		return c.inner.WriteJSON(m)
	}
	c.mu.Lock()
	op := c.byServer[m.ID]
	if op == nil {
		c.mu.Unlock()
		return nil // not an operation of this client's
	}
	drop := op.ended
	switch m.Type {
	case wsComplete:
		delete(c.byServer, op.server)
		if !op.ended {
			delete(c.byClient, op.client)
		}
	case wsError:
		// Spec: after an error "no Complete message will be emitted";
		// gqlgen writes one anyway, which is dropped.
		if !op.ended {
			op.ended = true
			delete(c.byClient, op.client)
		}
	}
	c.mu.Unlock()
	if drop {
		return nil
	}
	m.ID = op.client
	return c.inner.WriteJSON(m)
}

// outgoing reads a message gqlgen writes — its graphql-transport-ws
// message struct, with exported ID, Type and Payload — without encoding
// and decoding it again: with ten thousand subscribers every delta is
// written ten thousand times, and each JSON pass over it counts. Any
// other value reports false.
func outgoing(v any) (wsMessage, bool) {
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Pointer || rv.IsNil() || rv.Elem().Kind() != reflect.Struct {
		return wsMessage{}, false
	}
	rv = rv.Elem()
	id, typ, payload := rv.FieldByName("ID"), rv.FieldByName("Type"), rv.FieldByName("Payload")
	if !id.IsValid() || id.Kind() != reflect.String || !typ.IsValid() || typ.Kind() != reflect.String ||
		!payload.IsValid() || payload.Type() != reflect.TypeOf(json.RawMessage(nil)) {
		return wsMessage{}, false
	}
	return wsMessage{ID: id.String(), Type: typ.String(), Payload: payload.Interface().(json.RawMessage)}, true
}

// closeWith starts the close handshake with code, once; gqlgen's own
// close after it is a no-op in the adapter, so the client sees code.
func (c *wsConn) closeWith(code int, reason string) {
	c.mu.Lock()
	already := c.closed
	c.closed = true
	c.mu.Unlock()
	if !already {
		_ = c.inner.WriteClose(code, reason)
	}
}

func (c *wsConn) isClosed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closed
}

func (c *wsConn) WriteClose(code int, message string) error {
	return c.inner.WriteClose(code, message)
}

func (c *wsConn) Close() error {
	if c.open != nil {
		c.open.remove(c)
	}
	if c.initTimer != nil {
		c.initTimer.Stop()
	}
	if c.expiryTimer != nil {
		c.expiryTimer.Stop()
	}
	c.mu.Lock()
	if c.pingTimer != nil {
		c.pingTimer.Stop()
	}
	c.mu.Unlock()
	return c.inner.Close()
}

func (c *wsConn) Subprotocol() string { return c.inner.Subprotocol() }

// SetReadLimit forwards gqlgen's PayloadReadLimit: without it messages
// would be unbounded.
func (c *wsConn) SetReadLimit(limit int64) {
	if l, ok := c.inner.(transport.WebsocketReadLimiter); ok {
		l.SetReadLimit(limit)
	}
}

// SetReadDeadline forwards gqlgen's ping/pong deadline: without it a
// silent peer would hold its socket forever.
func (c *wsConn) SetReadDeadline(t time.Time) error {
	if d, ok := c.inner.(transport.WebsocketReadDeadliner); ok {
		return d.SetReadDeadline(t)
	}
	return nil
}

// closeReason fits s in a close frame (123 bytes of reason), cut at a
// rune boundary.
func closeReason(s string) string {
	const max = 123
	if len(s) <= max {
		return s
	}
	s = s[:max]
	for len(s) > 0 && !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s
}

// streamSlots bounds the streams each member holds open on this replica
// (Limits.MaxStreams): WebSocket connections and SSE requests together.
//
// A stream without a valid identity can run nothing (every subscription
// needs one), and it is told so before any budget is counted: an SSE
// request gets HTTP 401 at once. A WebSocket upgrade is accepted, so that
// its socket can say why in graphql-transport-ws terms (4401), and lives
// at most Limits.WSInitTimeout; such sockets still have bounds of the same
// size, so that they cannot pile up: those without an envelope share one,
// refused with HTTP 429 past it, those with an envelope that does not
// verify another, refused with HTTP 401 past it — never a retryable
// refusal for a caller whose envelope is wrong.
type streamSlots struct {
	max int

	mu      sync.Mutex
	open    map[string]int   // by identity subject; see the keys below
	metrics *metrics.Metrics // counts the open streams by transport
}

// The streamSlots keys of sockets without an identity; no subject is
// empty or starts with a NUL.
const (
	slotAnonymous = ""
	slotInvalid   = "\x00invalid envelope"
)

func newStreamSlots(max int) *streamSlots {
	return &streamSlots{max: max, open: map[string]int{}}
}

// Wrap counts the streams next serves: a request holds its member's slot
// until next returns, which for a WebSocket is when the connection has
// ended and for SSE when the stream has. Past the bound, the request is
// refused before any upgrade or work with HTTP 429 RATE_LIMITED. It must
// run after authority.Middleware, which puts the identity in the context.
func (s *streamSlots) Wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// The same tests gqlgen uses to pick the transport.
		ws := (transport.Websocket{}).Supports(r)
		if !ws && !(transport.SSE{}).Supports(r) {
			next.ServeHTTP(w, r)
			return
		}
		key := slotAnonymous
		if id, ok := authority.IdentityFromContext(r.Context()); ok {
			key = id.Subject
		} else if !ws {
			_, err := authority.RequireIdentity(r.Context())
			writeError(w, http.StatusUnauthorized, err)
			return
		} else if authority.AuthErrorFromContext(r.Context()) != nil {
			key = slotInvalid
		}
		transportName := "ws"
		if !ws {
			transportName = "sse"
		}
		if !s.acquire(key) {
			switch key {
			case slotInvalid:
				writeError(w, http.StatusUnauthorized, authority.AuthErrorFromContext(r.Context()))
			case slotAnonymous:
				writeError(w, http.StatusTooManyRequests, errcode.New(errcode.RateLimited,
					"too many open streams without an identity envelope: at most %d; send a valid envelope", s.max))
			default:
				writeError(w, http.StatusTooManyRequests, errcode.New(errcode.RateLimited,
					"too many open streams: at most %d WebSockets and SSE subscriptions per member; close one first", s.max))
			}
			return
		}
		defer s.release(key)
		defer s.metrics.StreamOpened(transportName)()
		next.ServeHTTP(w, r)
	})
}

func (s *streamSlots) acquire(key string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.open[key] >= s.max {
		return false
	}
	s.open[key]++
	return true
}

func (s *streamSlots) release(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.open[key]--; s.open[key] <= 0 {
		delete(s.open, key)
	}
}
