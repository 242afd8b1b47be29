package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/turngate/turngate/internal/gqlclient"
	"github.com/turngate/turngate/internal/servertest"
	"github.com/turngate/turngate/server"
)

// TestSubscribersShareEncodings: journal subscribers of one room that
// sent the same document get each entry encoded once (the metric of
// shared events moves by at least one per entry), and every subscriber —
// over graphql-transport-ws or SSE, with that document, with an alias,
// with a directive whose variable differs, or as another member —
// receives exactly the entries the journal query answers it with the
// same selection.
func TestSubscribersShareEncodings(t *testing.T) {
	t.Parallel()
	h := servertest.New(t, func(c *server.Config) { c.ModelPace = 5 * time.Millisecond })
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	a, b := h.Client(t, alice), h.Client(t, bob)
	room := servertest.Rooms(t, a)["Team room"]

	const full = `seq kind text turnId body { __typename ... on AnswerDelta { offset text } ... on TurnTerminal { outcome } }`
	const some = `seq kind text @include(if: $text)`
	type sub struct {
		name      string
		client    *gqlclient.Client
		sse       bool
		selection string
		vars      map[string]any
		field     string // the response key: the field's alias
	}
	subs := []sub{
		{"alice, document A", a, false, "journal(conversationId: $c, after: $a) { " + full + " }", nil, "journal"},
		{"alice again, document A", a, false, "journal(conversationId: $c, after: $a) { " + full + " }", nil, "journal"},
		{"bob, document A over SSE", b, true, "journal(conversationId: $c, after: $a) { " + full + " }", nil, "journal"},
		{"alice, an alias and no text", a, false, "e: journal(conversationId: $c, after: $a) { " + some + " }", map[string]any{"text": false}, "e"},
		{"alice, an alias and text", a, false, "e: journal(conversationId: $c, after: $a) { " + some + " }", map[string]any{"text": true}, "e"},
	}
	streams := make([]<-chan gqlclient.Message, len(subs))
	events := make([]<-chan gqlclient.Response, len(subs))
	for i, s := range subs {
		decl := "$c: ID!, $a: Int"
		if s.vars != nil {
			decl += ", $text: Boolean!"
		}
		vars := map[string]any{"c": room.ID, "a": room.Head}
		for k, v := range s.vars {
			vars[k] = v
		}
		req := gqlclient.Request{Query: "subscription(" + decl + ") { " + s.selection + " }", Variables: vars}
		var err error
		if s.sse {
			events[i], err = s.client.SSE(ctx, req)
		} else {
			streams[i], err = h.Dial(t, ctx, s.client).Subscribe(ctx, fmt.Sprint("s", i), req)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	before := scrape(t, h.Base+"/metrics")
	turn := servertest.SubmitAs(t, ctx, a, room.ID, "When is the launch?", "share-1")

	// next is subscriber i's next entry, as raw JSON.
	next := func(i int) json.RawMessage {
		var data json.RawMessage
		if subs[i].sse {
			select {
			case ev, ok := <-events[i]:
				if !ok {
					t.Fatalf("%s: the stream ended", subs[i].name)
				}
				if err := ev.Err(); err != nil {
					t.Fatalf("%s: %v", subs[i].name, err)
				}
				data = ev.Data
			case <-ctx.Done():
				t.Fatalf("%s: no entry", subs[i].name)
			}
		} else {
			select {
			case m, ok := <-streams[i]:
				if !ok || m.Type != "next" {
					t.Fatalf("%s: message %s %s", subs[i].name, m.Type, m.Payload)
				}
				var r gqlclient.Response
				if err := json.Unmarshal(m.Payload, &r); err != nil || r.Err() != nil {
					t.Fatalf("%s: %s (%v)", subs[i].name, m.Payload, err)
				}
				data = r.Data
			case <-ctx.Done():
				t.Fatalf("%s: no entry", subs[i].name)
			}
		}
		var fields map[string]json.RawMessage
		if err := json.Unmarshal(data, &fields); err != nil || len(fields) != 1 || fields[subs[i].field] == nil {
			t.Fatalf("%s: data %s, want one field %q", subs[i].name, data, subs[i].field)
		}
		return fields[subs[i].field]
	}
	entries := 0
	if done := servertest.AwaitTurnEnd(t, ctx, a, turn); done.State != "COMPLETED" {
		t.Fatalf("turn ended %s", done.State)
	}
	for i, s := range subs {
		var got []json.RawMessage
		for {
			e := next(i)
			got = append(got, e)
			var k struct{ Kind string }
			if err := json.Unmarshal(e, &k); err != nil {
				t.Fatal(err)
			}
			if k.Kind == "TURN_TERMINAL" {
				break
			}
		}
		// The same selection, asked of the journal query by the same member.
		decl := "$c: ID!, $a: Int"
		vars := map[string]any{"c": room.ID, "a": room.Head}
		if s.vars != nil {
			decl += ", $text: Boolean!"
			for k, v := range s.vars {
				vars[k] = v
			}
		}
		sel := s.selection[strings.Index(s.selection, "{"):]
		var page struct {
			Journal struct{ Entries []json.RawMessage }
		}
		if err := s.client.Do(ctx, "query("+decl+") { journal(conversationId: $c, after: $a, first: 200) { entries "+sel+" } }", vars, &page); err != nil {
			t.Fatal(err)
		}
		if len(got) != len(page.Journal.Entries) {
			t.Fatalf("%s: %d entries streamed, the query answers %d", s.name, len(got), len(page.Journal.Entries))
		}
		for j := range got {
			if string(got[j]) != string(page.Journal.Entries[j]) {
				t.Errorf("%s: entry %d streamed as\n%s\nthe query answers\n%s", s.name, j, got[j], page.Journal.Entries[j])
			}
		}
		entries = len(got)
	}
	after := scrape(t, h.Base+"/metrics")
	shared := sum(after, "turngate_stream_events_total", map[string]string{"encoding": "shared"}) -
		sum(before, "turngate_stream_events_total", map[string]string{"encoding": "shared"})
	if shared < float64(entries) {
		t.Errorf("%v events sent shared, want at least one per entry (%d): the second subscriber of document A gets the first one's bytes", shared, entries)
	}
}
