package gqlclient

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"

	"github.com/coder/websocket"
	"github.com/coder/websocket/wsjson"
)

// Error is one GraphQL error of a response.
type Error struct {
	Message    string         `json:"message"`
	Path       []any          `json:"path"`
	Extensions map[string]any `json:"extensions"`
}

// Code is the error's extensions.code.
func (e Error) Code() string {
	c, _ := e.Extensions["code"].(string)
	return c
}

// Response is a GraphQL response.
type Response struct {
	Data   json.RawMessage `json:"data"`
	Errors []Error         `json:"errors"`
}

// Err returns the response's first error, if any.
func (r *Response) Err() error {
	if len(r.Errors) == 0 {
		return nil
	}
	return &ResponseError{r.Errors}
}

// ResponseError wraps a response's GraphQL errors.
type ResponseError struct{ Errors []Error }

func (e *ResponseError) Error() string {
	return fmt.Sprintf("graphql: %s (%s)", e.Errors[0].Message, e.Errors[0].Code())
}

// CodeOf returns the extensions.code of err's first GraphQL error, or "".
func CodeOf(err error) string {
	var re *ResponseError
	if errors.As(err, &re) && len(re.Errors) > 0 {
		return re.Errors[0].Code()
	}
	return ""
}

// Request is one operation.
type Request struct {
	Query         string         `json:"query"`
	Variables     map[string]any `json:"variables,omitempty"`
	OperationName string         `json:"operationName,omitempty"`
}

// Client talks to one GraphQL endpoint with fixed headers.
type Client struct {
	URL    string // http://host:port/graphql
	Header http.Header
	HTTP   *http.Client
}

// Do runs a query or mutation; on success it decodes data into out (when
// not nil). GraphQL errors come back as *ResponseError.
func (c *Client) Do(ctx context.Context, query string, vars map[string]any, out any) error {
	resp, err := c.Raw(ctx, Request{Query: query, Variables: vars})
	if err != nil {
		return err
	}
	if err := resp.Err(); err != nil {
		return err
	}
	if out != nil {
		return json.Unmarshal(resp.Data, out)
	}
	return nil
}

// Raw posts a request and returns the whole response.
func (c *Client) Raw(ctx context.Context, r Request) (*Response, error) {
	res, err := c.post(ctx, r, "application/json")
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	if err != nil {
		return nil, err
	}
	var out Response
	if err := json.Unmarshal(raw, &out); err != nil {
		return nil, fmt.Errorf("decode response (HTTP %d): %w: %s", res.StatusCode, err, raw)
	}
	return &out, nil
}

// post sends r with the client's headers, asking for accept.
func (c *Client) post(ctx context.Context, r Request, accept string) (*http.Response, error) {
	body, err := json.Marshal(r)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.URL, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	for k, v := range c.Header {
		req.Header[k] = v
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", accept)
	hc := c.HTTP
	if hc == nil {
		hc = http.DefaultClient
	}
	return hc.Do(req)
}

// Message is one graphql-transport-ws message.
type Message struct {
	ID      string          `json:"id,omitempty"`
	Type    string          `json:"type"`
	Payload json.RawMessage `json:"payload,omitempty"`
}

// Conn is a graphql-transport-ws connection.
type Conn struct {
	ws *websocket.Conn

	mu   sync.Mutex
	subs map[string]chan Message
	done chan struct{}
	err  error
}

// Dial opens a graphql-transport-ws connection, sends connection_init with
// initPayload and waits for connection_ack. header goes on the upgrade
// request, which is where the identity envelope belongs.
func Dial(ctx context.Context, url string, header http.Header, initPayload any) (*Conn, error) {
	url = strings.Replace(url, "http", "ws", 1)
	ws, res, err := websocket.Dial(ctx, url, &websocket.DialOptions{
		HTTPHeader:   header,
		Subprotocols: []string{"graphql-transport-ws"},
	})
	if err != nil {
		if res != nil {
			return nil, fmt.Errorf("dial %s: HTTP %d: %w", url, res.StatusCode, err)
		}
		return nil, fmt.Errorf("dial %s: %w", url, err)
	}
	ws.SetReadLimit(16 << 20)
	init := Message{Type: "connection_init"}
	if initPayload != nil {
		if init.Payload, err = json.Marshal(initPayload); err != nil {
			return nil, err
		}
	}
	if err := wsjson.Write(ctx, ws, init); err != nil {
		ws.CloseNow()
		return nil, fmt.Errorf("connection_init: %w", err)
	}
	for {
		var m Message
		if err := wsjson.Read(ctx, ws, &m); err != nil {
			ws.CloseNow()
			return nil, fmt.Errorf("waiting for connection_ack: %w", err)
		}
		if m.Type == "connection_ack" {
			break
		}
		if m.Type == "ping" {
			if err := wsjson.Write(ctx, ws, Message{Type: "pong"}); err != nil {
				ws.CloseNow()
				return nil, err
			}
		}
	}
	c := &Conn{ws: ws, subs: make(map[string]chan Message), done: make(chan struct{})}
	go c.readLoop()
	return c, nil
}

// readLoop owns the reading side: it routes messages to subscriptions and
// answers pings. It closes every subscription channel when the connection
// ends.
func (c *Conn) readLoop() {
	ctx := context.Background()
	defer func() {
		c.mu.Lock()
		for id, ch := range c.subs {
			close(ch)
			delete(c.subs, id)
		}
		c.mu.Unlock()
		close(c.done)
	}()
	for {
		var m Message
		if err := wsjson.Read(ctx, c.ws, &m); err != nil {
			c.mu.Lock()
			c.err = err
			c.mu.Unlock()
			return
		}
		switch m.Type {
		case "ping":
			_ = wsjson.Write(ctx, c.ws, Message{Type: "pong"})
		case "next", "error", "complete":
			c.mu.Lock()
			ch, ok := c.subs[m.ID]
			if ok && (m.Type == "complete" || m.Type == "error") {
				delete(c.subs, m.ID)
			}
			c.mu.Unlock()
			if !ok {
				continue
			}
			ch <- m // buffered generously; tests read what they subscribe to
			if m.Type != "next" {
				close(ch)
			}
		}
	}
}

// Subscribe starts operation id and returns its messages: "next" messages,
// then one "complete" or "error", after which the channel is closed. It is
// also closed when the connection ends.
func (c *Conn) Subscribe(ctx context.Context, id string, r Request) (<-chan Message, error) {
	ch := make(chan Message, 4096)
	c.mu.Lock()
	c.subs[id] = ch
	c.mu.Unlock()
	payload, err := json.Marshal(r)
	if err != nil {
		return nil, err
	}
	if err := wsjson.Write(ctx, c.ws, Message{ID: id, Type: "subscribe", Payload: payload}); err != nil {
		return nil, err
	}
	return ch, nil
}

// Close closes the connection abruptly, like a dropped network.
func (c *Conn) Close() {
	c.ws.CloseNow()
	<-c.done
}

// Done is closed when the connection has ended.
func (c *Conn) Done() <-chan struct{} { return c.done }

// SSE runs a subscription over Server-Sent Events and returns each "next"
// payload until the stream completes, ctx ends, or the server errors.
func (c *Client) SSE(ctx context.Context, r Request) (<-chan Response, error) {
	res, err := c.post(ctx, r, "text/event-stream")
	if err != nil {
		return nil, err
	}
	out := make(chan Response, 256)
	go func() {
		defer close(out)
		defer res.Body.Close()
		sc := bufio.NewScanner(res.Body)
		sc.Buffer(make([]byte, 64<<10), 16<<20)
		var event string
		for sc.Scan() {
			line := sc.Text()
			switch {
			case strings.HasPrefix(line, "event:"):
				event = strings.TrimSpace(strings.TrimPrefix(line, "event:"))
				if event == "complete" {
					return
				}
			case strings.HasPrefix(line, "data:") && event == "next":
				var resp Response
				if json.Unmarshal([]byte(strings.TrimSpace(strings.TrimPrefix(line, "data:"))), &resp) == nil {
					select {
					case out <- resp:
					case <-ctx.Done():
						return
					}
				}
			}
		}
	}()
	return out, nil
}
