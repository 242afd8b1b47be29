package runtime_test

import (
	"encoding/json"
	"os/exec"
	"strings"
	"testing"
)

// TestRuntimeImportsNothingTrusted keeps the untrusted runtime away from the
// backend: nothing under runtime/ may reach the database, the journal, the
// authority, tools, the gateway, guards, the GraphQL layer or any network
// client. It reads the real transitive import graph from `go list`.
func TestRuntimeImportsNothingTrusted(t *testing.T) {
	t.Parallel()
	out, err := exec.Command("go", "list", "-deps", "-json=ImportPath", "./...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	forbidden := []string{
		"github.com/turngate/turngate/ent",
		"github.com/turngate/turngate/graph",
		"github.com/turngate/turngate/journal",
		"github.com/turngate/turngate/authority",
		"github.com/turngate/turngate/tools",
		"github.com/turngate/turngate/gateway",
		"github.com/turngate/turngate/guard",
		"github.com/turngate/turngate/turn",
		"database/sql",
		"net/http",
		"net/rpc",
		"net/smtp",
		"github.com/lib/pq",
		"github.com/coder/websocket",
	}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	seen := 0
	for dec.More() {
		var p struct{ ImportPath string }
		if err := dec.Decode(&p); err != nil {
			t.Fatalf("decode go list: %v", err)
		}
		seen++
		for _, f := range forbidden {
			if p.ImportPath == f || strings.HasPrefix(p.ImportPath, f+"/") {
				t.Errorf("runtime/... transitively imports %s", p.ImportPath)
			}
		}
		if p.ImportPath == "net" {
			t.Errorf("runtime/... transitively imports package net (a network client)")
		}
	}
	if seen == 0 {
		t.Fatal("go list reported no packages")
	}
}
