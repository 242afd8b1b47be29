package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/vektah/gqlparser/v2/gqlerror"

	"github.com/turngate/turngate/authority"
	"github.com/turngate/turngate/errcode"
	"github.com/turngate/turngate/graph/extension"
)

// edge is the first thing a GraphQL request meets after its identity is
// decided (from a header alone), before any parsing work: it bounds the
// body, refuses what the GraphQL transports would misread (a body that is
// not JSON, invalid UTF-8, lone surrogate escapes) with a coded error that
// never echoes the body, and lets a stream's request outlive the server's
// ReadTimeout once its body is read. A request without an identity waits
// for the anonymous gate once its body is read, and a POST's query
// document is bounded here (anonymous), from the body the edge has
// decoded anyway: gqlgen would decode the body again before refusing it,
// which was most of what a refused anonymous request cost.
type edge struct {
	maxBody   int64
	gate      *anonymousGate
	anonymous func(query string) error
	next      http.Handler
}

func (e edge) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.Header.Get("Upgrade") != "":
		// A WebSocket upgrade has no body; its messages are bounded by
		// the transport's read limit.
		e.next.ServeHTTP(w, r)
		return
	case r.Method == http.MethodGet || r.Method == http.MethodHead:
		if err := checkQueryParams(r.URL.RawQuery); err != nil {
			writeError(w, http.StatusBadRequest, err)
			return
		}
		leave, ok := e.enter(w, r)
		if !ok {
			return
		}
		defer leave()
		e.next.ServeHTTP(w, r.WithContext(extension.NewContextReadOnly(r.Context())))
		return
	case r.Method == http.MethodOptions:
		e.next.ServeHTTP(w, r)
		return
	case r.Method != http.MethodPost:
		w.Header().Set("Allow", "GET, POST, OPTIONS")
		writeError(w, http.StatusMethodNotAllowed, errcode.New(errcode.BadUserInput, "method %s is not allowed: use POST (or GET for queries)", r.Method))
		return
	}
	if r.ContentLength > e.maxBody {
		writeError(w, http.StatusRequestEntityTooLarge, tooLarge(e.maxBody))
		return
	}
	if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt != "application/json" {
		writeError(w, http.StatusUnsupportedMediaType, errcode.New(errcode.BadUserInput, "the request body must be application/json"))
		return
	}
	body, err := readBody(http.MaxBytesReader(w, r.Body, e.maxBody), r.ContentLength)
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			writeError(w, http.StatusRequestEntityTooLarge, tooLarge(e.maxBody))
			return
		}
		writeError(w, http.StatusBadRequest, errcode.New(errcode.BadUserInput, "the request body could not be read"))
		return
	}
	// The gate is taken once the body is read, so that a client that
	// trickles its body (for up to ReadTimeout) holds nothing but its
	// own connection.
	leave, ok := e.enter(w, r)
	if !ok {
		return
	}
	defer leave()
	query, err := checkBody(body)
	if err != nil {
		writeError(w, http.StatusBadRequest, err)
		return
	}
	if _, member := authority.IdentityFromContext(r.Context()); !member && e.anonymous != nil {
		if err := e.anonymous(query); err != nil {
			status := http.StatusRequestEntityTooLarge
			if e, _ := errcode.From(err); e != nil && e.Code == errcode.ValidationFailed {
				status = http.StatusUnprocessableEntity
			}
			writeError(w, status, err)
			return
		}
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	if isStream(r) {
		// The request is read, under the server's ReadTimeout; the
		// stream that answers it may last for hours.
		_ = http.NewResponseController(w).SetReadDeadline(time.Time{})
	}
	e.next.ServeHTTP(w, r)
}

// enter takes the anonymous gate for a request without an identity, or
// answers it RATE_LIMITED; a member's request passes.
func (e edge) enter(w http.ResponseWriter, r *http.Request) (leave func(), ok bool) {
	if _, member := authority.IdentityFromContext(r.Context()); member || e.gate == nil {
		return func() {}, true
	}
	leave, ok = e.gate.enter(r.Context())
	if !ok {
		writeError(w, http.StatusTooManyRequests, &errcode.Error{Code: errcode.RateLimited, RetryAfter: anonWait,
			Message: "too many requests without an identity envelope on this server; retry later, or send a valid envelope"})
	}
	return leave, ok
}

// isStream reports whether r asks for an SSE subscription.
func isStream(r *http.Request) bool {
	return strings.Contains(r.Header.Get("Accept"), "text/event-stream")
}

func tooLarge(limit int64) error {
	return errcode.New(errcode.PayloadTooLarge, "the request body is over the limit of %d bytes", limit)
}

// readBody reads a request body whole, into a buffer of the declared
// length when there is one (the reader bounds it): io.ReadAll's doubling
// allocates some three times what it reads.
func readBody(r io.Reader, declared int64) ([]byte, error) {
	if declared <= 0 {
		return io.ReadAll(r)
	}
	buf := bytes.NewBuffer(make([]byte, 0, declared+bytes.MinRead))
	_, err := buf.ReadFrom(r)
	return buf.Bytes(), err
}

// checkBody refuses a body that is not one JSON object of valid UTF-8
// without lone surrogate escapes, and returns its query. The body is never
// quoted back.
func checkBody(body []byte) (string, error) {
	if err := extension.CheckRawJSON(body); err != nil {
		return "", err
	}
	// The shape gqlgen reads, checked here so that its decoding error,
	// which quotes the whole body, never happens.
	var req struct {
		Query         *string         `json:"query"`
		OperationName *string         `json:"operationName"`
		Variables     json.RawMessage `json:"variables"`
		Extensions    json.RawMessage `json:"extensions"`
	}
	err := json.Unmarshal(body, &req)
	if syntax := (*json.SyntaxError)(nil); errors.As(err, &syntax) {
		return "", errcode.New(errcode.BadUserInput, "the request body is not valid JSON")
	}
	shape := errcode.New(errcode.BadUserInput, "the request body must be a JSON object with a string query, an optional string operationName and optional variables and extensions objects")
	if b := bytes.TrimLeft(body, " \t\r\n"); len(b) == 0 || b[0] != '{' || err != nil {
		return "", shape
	}
	for _, obj := range []json.RawMessage{req.Variables, req.Extensions} {
		if o := bytes.TrimSpace(obj); len(o) > 0 && o[0] != '{' && !bytes.Equal(o, []byte("null")) {
			return "", shape
		}
	}
	if req.Query == nil {
		return "", nil
	}
	return *req.Query, nil
}

// checkQueryParams checks a GET request's parameters like a body: each
// decoded value must be valid UTF-8 without lone surrogate escapes (the
// variables and extensions parameters are JSON).
func checkQueryParams(raw string) error {
	vals, err := url.ParseQuery(raw)
	if err != nil {
		return errcode.New(errcode.BadUserInput, "the query string is malformed")
	}
	for _, vs := range vals {
		for _, v := range vs {
			if err := extension.CheckRawJSON([]byte(v)); err != nil {
				return err
			}
		}
	}
	for _, name := range []string{"variables", "extensions"} {
		// gqlgen would answer a malformed one without a code.
		if v := bytes.TrimSpace([]byte(vals.Get(name))); len(v) > 0 && (v[0] != '{' || !json.Valid(v)) {
			return errcode.New(errcode.BadUserInput, "the %s parameter must be a JSON object", name)
		}
	}
	return nil
}

// writeError answers a request the GraphQL handler never sees with a
// GraphQL error response carrying a code, like every other error.
func writeError(w http.ResponseWriter, status int, err error) {
	code := errcode.Internal
	msg := "internal error"
	if e, ok := errcode.From(err); ok {
		code, msg = e.Code, e.Message
	}
	gqlErr := extension.Present(&gqlerror.Error{Message: msg}, code, err)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	if e, ok := errcode.From(err); ok && e.RetryAfter > 0 {
		w.Header().Set("Retry-After", fmt.Sprint(int((e.RetryAfter+time.Second-1)/time.Second)))
	}
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]any{"errors": []*gqlerror.Error{gqlErr}})
}
