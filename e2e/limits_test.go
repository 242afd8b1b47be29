package e2e

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/turngate/turngate/internal/e2etest"
	"github.com/turngate/turngate/internal/servertest"
	"github.com/turngate/turngate/server"
)

// TestQueryCacheHeavyDocuments: 1,000 distinct valid documents of exactly
// the maximum size, in shapes whose syntax trees outweigh their text many
// times over while selecting few enough fields to pass MaxFields (a
// comment token per two bytes, a list value per two bytes, 401 fields),
// leave the replica's resident memory within 64 MiB of idle. Each is
// parsed, validated, offered to the parsed-query cache and run.
// TestQueryCacheMemory does the same with documents as light as their
// text. When the cache weighed a document by its text alone, this grew by
// 377 MiB.
//
// The documents go one at a time: the subject is what the replica keeps.
// What it holds in flight grows with the requests parsed at once (a 64
// KiB document of comment lines is some 3 MB of tree, of list values 7 MB;
// measured with those two shapes, +41 MiB two at a time, +65 MiB four at
// a time), which Limits.ParseBudget bounds. They come from a member:
// without an envelope, a document of this many tokens is refused before
// it is parsed.
func TestQueryCacheHeavyDocuments(t *testing.T) {
	t.Parallel()
	srv, c := startMemberAttackTarget(t, alice)
	pid := srv.Cmd.Process.Pid
	// The deadline bounds a hang, not the speed: 1,000 parses of 64 KiB
	// took 64 s beside the rest of the tier on a busy CI machine.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	idle := e2etest.SettledRSS(ctx, pid)
	peak := samplePeak(pid)
	const n = 1000
	for i := range n {
		shape := servertest.HeavyShapes[i%len(servertest.HeavyShapes)]
		req := shape.Request(i, server.DefaultMaxQuery)
		if len(req.Query) != server.DefaultMaxQuery {
			t.Errorf("%s #%d: %d bytes, want %d", shape.Name, i, len(req.Query), server.DefaultMaxQuery)
			break
		}
		var data struct {
			Typename string `json:"__typename"`
		}
		res, err := c.Raw(ctx, req)
		if err == nil {
			err = res.Err()
		}
		if err == nil {
			err = json.Unmarshal(res.Data, &data)
		}
		if err != nil || data.Typename != "Query" {
			var got []byte
			if res != nil {
				got = res.Data
			}
			t.Errorf("%s #%d: %v, data %.100s", shape.Name, i, err, got)
			break
		}
	}
	top := peak.Stop()
	if t.Failed() {
		return
	}
	after := e2etest.SettledRSS(ctx, pid)
	t.Logf("query cache, heavy documents: idle RSS %.1f MiB, settled after %d documents %.1f MiB (+%.1f MiB), peak %.1f MiB",
		e2etest.Mib(idle), n, e2etest.Mib(after), e2etest.Mib(after-idle), e2etest.Mib(top))
	if after-idle >= 64<<20 {
		t.Errorf("RSS grew by %.1f MiB after %d heavy documents of %d bytes: over 64 MiB", e2etest.Mib(after-idle), n, server.DefaultMaxQuery)
	}
}
