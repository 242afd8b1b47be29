package callback

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/turngate/turngate/guard"
)

// An email streamed in pieces is never written in pieces: each write ends
// at a whitespace, so redaction sees the address whole, and the offsets
// count the redacted text.
func TestCoalescerRedactsWholeWords(t *testing.T) {
	t.Parallel()
	r, err := guard.NewRedactor(guard.DefaultPatterns())
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var written []string
	next := 0
	co := newCoalescer(time.Hour, 1, 0, func(s string) string { out, _ := r.Redact(s); return out }, func(text string, offset int) error {
		mu.Lock()
		defer mu.Unlock()
		if offset != next {
			t.Errorf("write at offset %d, want %d", offset, next)
		}
		next += len(text)
		written = append(written, text)
		return nil
	})
	for _, tok := range []string{"write to carol", ".vendor@exa", "mple.org", " today", " please"} {
		co.add(tok) // max 1: every token flushes
	}
	held, at, err := co.hold()
	if err != nil || at != next {
		t.Fatalf("hold at %d (%v), want %d", at, err, next)
	}
	all := strings.Join(written, "") + held
	if all != "write to [redacted:email] today please" {
		t.Fatalf("streamed %q", all)
	}
	for _, w := range written {
		if strings.Contains(w, "carol") || strings.Contains(w, "example") || strings.Contains(w, "mple.org") {
			t.Fatalf("a write holds part of the address: %q", w)
		}
	}
}
