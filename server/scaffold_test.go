package server_test

import (
	"encoding/json"
	"io"
	"net/http"
	"sync"
)

// The scaffolding the server's tests share: reading a journal
// subscription, dialling the GraphQL WebSocket as a member, and a private
// database with a data folder for real turngate processes.

// modelRequests keeps the request bodies a fake model endpoint received.
type modelRequests struct {
	mu     sync.Mutex
	bodies []map[string]any
}

// record decodes r's JSON body and keeps it, returning it and how many
// bodies are kept with it; a body that is not JSON is answered 400 and
// reported not ok.
func (m *modelRequests) record(w http.ResponseWriter, r *http.Request) (map[string]any, int, bool) {
	raw, _ := io.ReadAll(r.Body)
	var body map[string]any
	if err := json.Unmarshal(raw, &body); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return nil, 0, false
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.bodies = append(m.bodies, body)
	return body, len(m.bodies), true
}
