package server_test

import (
	"encoding/json"
	"strings"

	"github.com/turngate/turngate/server"
)

func jsonUnmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }

// containsCode reports whether a payload of GraphQL errors (an array, or a
// response object) carries extensions.code == code.
func containsCode(payload []byte, code string) bool {
	var errs []struct {
		Extensions map[string]any `json:"extensions"`
	}
	if json.Unmarshal(payload, &errs) != nil {
		var r struct {
			Errors []struct {
				Extensions map[string]any `json:"extensions"`
			} `json:"errors"`
		}
		if json.Unmarshal(payload, &r) != nil {
			return false
		}
		errs = r.Errors
	}
	for _, e := range errs {
		if c, _ := e.Extensions["code"].(string); strings.EqualFold(c, code) {
			return true
		}
	}
	return false
}

// unlimitedCommands lifts the per-member command limit for tests and
// benchmarks that submit faster than a person, to measure or stress
// something else.
var unlimitedCommands = server.Limits{CommandRate: 1e9, CommandBurst: 1 << 30, SandboxLazy: true}
