package guard

import (
	"errors"
	"fmt"
	"regexp/syntax"
	"slices"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"
)

// Secret-shaped fixtures are assembled at run time so that the source file
// itself does not trip secret scanners.
var (
	fakeSK     = "sk-" + strings.Repeat("a1B2", 6)
	fakeSKProj = "sk-proj-" + strings.Repeat("Xy_9", 8)
	fakeAWS    = "AKIA" + "IOSFODNN7EXAMPLE" // AWS's documented example id
	fakeGHP    = "ghp_" + strings.Repeat("a1B2", 9)
	fakeGHS    = "ghs_" + strings.Repeat("Zz09", 10)
	fakePAT    = "github_pat_" + strings.Repeat("A1_b", 8)
	fakeJWT    = "eyJhbGciOiJIUzI1NiJ9." + strings.Repeat("eyJzdWIiOiIxIn0", 2) + ".c2lnbmF0dXJl"
	pemBegin   = "-----BEGIN " + "RSA PRIVATE KEY-----"
	pemEnd     = "-----END " + "RSA PRIVATE KEY-----"
	fakePEM    = pemBegin + "\nMIIEpAIBAAKCAQEA\nq1w2e3r4t5y6\n" + pemEnd
)

func defaultRedactor(t *testing.T) *Redactor {
	t.Helper()
	r, err := NewRedactor(DefaultPatterns())
	if err != nil {
		t.Fatalf("NewRedactor(DefaultPatterns()): %v", err)
	}
	return r
}

func TestDefaultPatterns(t *testing.T) {
	r := defaultRedactor(t)
	tests := []struct {
		name   string
		in     string
		secret string // the text that must disappear; "" for a non-secret
		want   string // the pattern name expected in the marker
	}{
		{"email", "write to jane.doe+x@mail.example.co.uk today", "jane.doe+x@mail.example.co.uk", "email"},
		{"sk key", "key=" + fakeSK + ";", fakeSK, "api_key"},
		{"sk project key", "OPENAI_API_KEY=" + fakeSKProj, fakeSKProj, "api_key"},
		{"aws access key id", "aws_access_key_id = " + fakeAWS, fakeAWS, "aws_access_key_id"},
		{"github classic token", "token " + fakeGHP + " end", fakeGHP, "github_token"},
		{"github server token", fakeGHS, fakeGHS, "github_token"},
		{"github fine-grained token", "pat: " + fakePAT, fakePAT, "github_token"},
		{"bearer header", "Authorization: Bearer " + fakeJWT, "Bearer " + fakeJWT, "bearer_token"},
		{"bearer lowercase", `{"auth":"bearer ` + fakeJWT + `"}`, fakeJWT, "bearer_token"},
		{"bearer wins over sk key", "Bearer " + fakeSK, "Bearer " + fakeSK, "bearer_token"},
		{"pem private key", "key:\n" + fakePEM + "\nafter", fakePEM, "private_key"},
		{"pem openssh key", "-----BEGIN OPENSSH " + "PRIVATE KEY-----\nb3Blbn\n-----END OPENSSH " + "PRIVATE KEY-----", "b3Blbn", "private_key"},
		{"pem unterminated", "log:\n" + pemBegin + "\nMIIEpAIBAAKCAQEA\nq1w2", "MIIEpAIBAAKCAQEA", "private_key"},

		{"plain prose", "The bearer of bad news was asked to leave.", "", ""},
		{"bearer scheme named", "Use Bearer authentication for the API.", "", ""},
		{"at mention", "ping @alice about the review", "", ""},
		{"package version", "upgrade lodash@4.17.21 now", "", ""},
		{"host without tld", "ssh admin@localhost", "", ""},
		{"short sk", "sk-short and sk-learn", "", ""},
		{"sk inside word", "risk-assessment-for-the-project-2024", "", ""},
		{"AKIA too short", "AKIA1234 is not a key", "", ""},
		{"AKIA too long", "AKIA" + strings.Repeat("A", 20), "", ""},
		{"ghp too short", "ghp_abc123", "", ""},
		{"public key block", "-----BEGIN PUBLIC KEY-----\nMIIBIjAN\n-----END PUBLIC KEY-----", "", ""},
		{"certificate block", "-----BEGIN CERTIFICATE-----\nMIIDdzCC\n-----END CERTIFICATE-----", "", ""},
		{"uuid", "turn 3f2a9c1e-1b2c-4d5e-8f90-a1b2c3d4e5f6 finished", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, n := r.Redact(tt.in)
			if tt.secret == "" {
				if n != 0 || got != tt.in {
					t.Fatalf("Redact(%q) = %q, %d; want unchanged", tt.in, got, n)
				}
				return
			}
			if n != 1 {
				t.Errorf("Redact(%q) count = %d, want 1 (got %q)", tt.in, n, got)
			}
			if strings.Contains(got, tt.secret) {
				t.Errorf("Redact(%q) = %q still contains %q", tt.in, got, tt.secret)
			}
			if marker := "[redacted:" + tt.want + "]"; !strings.Contains(got, marker) {
				t.Errorf("Redact(%q) = %q, want marker %s", tt.in, got, marker)
			}
		})
	}
}

func TestRedactExactOutputAndCount(t *testing.T) {
	r := defaultRedactor(t)
	tests := []struct {
		in    string
		want  string
		count int
	}{
		{"nothing here", "nothing here", 0},
		{"a@b.io", "[redacted:email]", 1},
		{"a@b.io, c@d.io and " + fakeSK, "[redacted:email], [redacted:email] and [redacted:api_key]", 3},
		{fakeAWS + " " + fakeAWS, "[redacted:aws_access_key_id] [redacted:aws_access_key_id]", 2},
		{"x\n" + fakePEM + "\ny " + fakeGHP, "x\n[redacted:private_key]\ny [redacted:github_token]", 2},
	}
	for _, tt := range tests {
		got, n := r.Redact(tt.in)
		if got != tt.want || n != tt.count {
			t.Errorf("Redact(%q) = %q, %d; want %q, %d", tt.in, got, n, tt.want, tt.count)
		}
	}
}

func TestRedactCustomPatterns(t *testing.T) {
	// Patterns with their own groups and flags must still be told apart.
	r, err := NewRedactor([]Pattern{
		{Name: "pair", Expr: `(x)(y)z`},
		{Name: "word", Expr: `(?i)secret`},
		{Name: "digits", Expr: `\d{3,}`},
		{Name: "marker", Expr: `redacted`}, // must not re-redact markers
	})
	if err != nil {
		t.Fatal(err)
	}
	got, n := r.Redact("xyz SECRET 12 3456 redacted")
	want := "[redacted:pair] [redacted:word] 12 [redacted:digits] [redacted:marker]"
	if got != want || n != 4 {
		t.Fatalf("Redact = %q, %d; want %q, 4", got, n, want)
	}
}

func TestRedactSkipsEmptyMatches(t *testing.T) {
	// The empty-string check in NewRedactor cannot see that \b matches
	// nothing between words; Redact must still not insert markers there.
	r, err := NewRedactor([]Pattern{{Name: "secret", Expr: `(?:secret)?\b`}})
	if err != nil {
		t.Fatal(err)
	}
	if got, n := r.Redact("a secret b"); got != "a [redacted:secret] b" || n != 1 {
		t.Fatalf("Redact = %q, %d; want %q, 1", got, n, "a [redacted:secret] b")
	}
}

func TestRedactNil(t *testing.T) {
	empty, err := NewRedactor(nil)
	if err != nil {
		t.Fatal(err)
	}
	for name, r := range map[string]*Redactor{"nil": nil, "no patterns": empty} {
		in := "mail a@b.io key " + fakeSK
		if got, n := r.Redact(in); got != in || n != 0 {
			t.Errorf("%s: Redact = %q, %d; want input unchanged, 0", name, got, n)
		}
	}
}

func TestNewRedactorErrors(t *testing.T) {
	tests := []struct {
		name     string
		patterns []Pattern
		wantIn   string
	}{
		{"bad expr", []Pattern{{Name: "email", Expr: `.+@`}, {Name: "broken", Expr: `a(b`}}, `"broken"`},
		{"empty expr", []Pattern{{Name: "nothing", Expr: ``}}, `"nothing"`},
		{"matches empty", []Pattern{{Name: "stars", Expr: `a*`}}, `"stars"`},
		{"no name", []Pattern{{Expr: `a`}}, "no name"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := NewRedactor(tt.patterns)
			if err == nil || r != nil {
				t.Fatalf("NewRedactor = %v, %v; want error", r, err)
			}
			if !strings.Contains(err.Error(), tt.wantIn) {
				t.Errorf("error %q does not mention %s", err, tt.wantIn)
			}
		})
	}
	_, err := NewRedactor([]Pattern{{Name: "broken", Expr: `a(b`}})
	var se *syntax.Error
	if !errors.As(err, &se) {
		t.Errorf("error %v does not wrap *syntax.Error", err)
	}
}

func TestDefaultPatternsIsACopy(t *testing.T) {
	p := DefaultPatterns()
	p[0].Expr = "changed"
	if DefaultPatterns()[0].Expr == "changed" {
		t.Fatal("DefaultPatterns returned shared storage")
	}
}

func evidence(ids ...string) *Evidence {
	e := new(Evidence)
	e.Add(ids...)
	return e
}

func TestCheckCitations(t *testing.T) {
	const turn = "turn:3f2a9c1e-1b2c-4d5e-8f90-a1b2c3d4e5f6"
	tests := []struct {
		name      string
		answer    string
		evidence  *Evidence
		want      string
		cited     []string
		removed   []string
		needsCorr bool
	}{
		{
			name:     "known kept",
			answer:   "Paris is the capital [doc:42#p1]. See [" + turn + "].",
			evidence: evidence("doc:42#p1", turn),
			want:     "Paris is the capital [doc:42#p1]. See [" + turn + "].",
			cited:    []string{"doc:42#p1", turn},
		},
		{
			name:     "unknown before full stop",
			answer:   "Paris is the capital [doc:42#p1] [doc:99]. Next.",
			evidence: evidence("doc:42#p1"),
			want:     "Paris is the capital [doc:42#p1]. Next.",
			cited:    []string{"doc:42#p1"},
			removed:  []string{"doc:99"},
		},
		{
			name:     "unknown mid sentence",
			answer:   "It rose [doc:1] by [artifact:x-9] ten percent [doc:1].",
			evidence: evidence("doc:1"),
			want:     "It rose [doc:1] by ten percent [doc:1].",
			cited:    []string{"doc:1"},
			removed:  []string{"artifact:x-9"},
		},
		{
			name:     "unknown at start and line start",
			answer:   "[doc:9] First [doc:1].\n[doc:8] Second [doc:1].",
			evidence: evidence("doc:1"),
			want:     "First [doc:1].\nSecond [doc:1].",
			cited:    []string{"doc:1"},
			removed:  []string{"doc:9", "doc:8"},
		},
		{
			name:     "consecutive unknown",
			answer:   "A claim [doc:7] [doc:8] [doc:1] and more [doc:7] [doc:8].",
			evidence: evidence("doc:1"),
			want:     "A claim [doc:1] and more.",
			cited:    []string{"doc:1"},
			removed:  []string{"doc:7", "doc:8"},
		},
		{
			name:     "unknown glued to word",
			answer:   "word[doc:7] next and (see [doc:7]) end [doc:1]",
			evidence: evidence("doc:1"),
			want:     "word next and (see) end [doc:1]",
			cited:    []string{"doc:1"},
			removed:  []string{"doc:7"},
		},
		{
			name:     "unknown after opening bracket",
			answer:   "Growth ([doc:7] and [doc:1]) was slow.",
			evidence: evidence("doc:1"),
			want:     "Growth (and [doc:1]) was slow.",
			cited:    []string{"doc:1"},
			removed:  []string{"doc:7"},
		},
		{
			name:     "duplicates reported once",
			answer:   "x [doc:2] y [doc:1] z [doc:2] w [doc:1]",
			evidence: evidence("doc:1", "doc:2"),
			want:     "x [doc:2] y [doc:1] z [doc:2] w [doc:1]",
			cited:    []string{"doc:2", "doc:1"},
		},
		{
			name:      "evidence but nothing known cited",
			answer:    "Paris is the capital [doc:99].",
			evidence:  evidence("doc:1"),
			want:      "Paris is the capital.",
			removed:   []string{"doc:99"},
			needsCorr: true,
		},
		{
			name:      "evidence but no citations",
			answer:    "Paris is the capital.",
			evidence:  evidence("doc:1"),
			want:      "Paris is the capital.",
			needsCorr: true,
		},
		{
			name:     "no evidence removes all, no correction",
			answer:   "Paris [doc:1] is the capital [turn:abc].",
			evidence: new(Evidence),
			want:     "Paris is the capital.",
			removed:  []string{"doc:1", "turn:abc"},
		},
		{
			name:    "nil evidence",
			answer:  "Plain answer [doc:1].",
			want:    "Plain answer.",
			removed: []string{"doc:1"},
		},
		{
			name:     "not citations are left alone",
			answer:   "Arrays [0] and [web:x] and [doc:] and [doc:a b] stay.",
			evidence: evidence("doc:1"),
			want:     "Arrays [0] and [web:x] and [doc:] and [doc:a b] stay.",
			// evidence exists, nothing cited
			needsCorr: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := CheckCitations(tt.answer, tt.evidence)
			if got.Text != tt.want {
				t.Errorf("Text = %q, want %q", got.Text, tt.want)
			}
			if strings.Contains(got.Text, "  ") || strings.Contains(got.Text, " .") {
				t.Errorf("Text %q is not tidy", got.Text)
			}
			if !slices.Equal(got.Cited, tt.cited) {
				t.Errorf("Cited = %q, want %q", got.Cited, tt.cited)
			}
			if !slices.Equal(got.Removed, tt.removed) {
				t.Errorf("Removed = %q, want %q", got.Removed, tt.removed)
			}
			if got.NeedsCorrection != tt.needsCorr {
				t.Errorf("NeedsCorrection = %v, want %v", got.NeedsCorrection, tt.needsCorr)
			}
		})
	}
}

func TestEvidence(t *testing.T) {
	e := new(Evidence)
	e.Add("doc:2", "doc:1", "[doc:2]", " turn:t1 ", "", "doc:1")
	if got, want := e.IDs(), []string{"doc:2", "doc:1", "turn:t1"}; !slices.Equal(got, want) {
		t.Fatalf("IDs = %q, want %q", got, want)
	}
	if e.Len() != 3 {
		t.Errorf("Len = %d, want 3", e.Len())
	}
	for id, want := range map[string]bool{"doc:1": true, "turn:t1": true, "doc:3": false, "[doc:1]": false, "": false} {
		if e.Has(id) != want {
			t.Errorf("Has(%q) = %v, want %v", id, !want, want)
		}
	}
	ids := e.IDs()
	ids[0] = "mutated"
	if e.IDs()[0] != "doc:2" {
		t.Error("IDs returned shared storage")
	}

	var nilE *Evidence
	if nilE.Has("doc:1") || nilE.Len() != 0 || nilE.IDs() != nil {
		t.Error("nil *Evidence is not empty")
	}
}

func TestEvidenceConcurrent(t *testing.T) {
	e := new(Evidence)
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range 50 {
				e.Add(fmt.Sprintf("doc:%d", j))
				_ = e.Has(fmt.Sprintf("doc:%d", i))
				_ = e.IDs()
				_ = CheckCitations("x [doc:1] y [doc:77]", e)
			}
		}()
	}
	wg.Wait()
	if e.Len() != 50 {
		t.Fatalf("Len = %d, want 50", e.Len())
	}
}

func TestCorrectionPrompt(t *testing.T) {
	ids := []string{"doc:42#p1", "turn:abc", "artifact:7f", "doc:42#p1"}
	p := CorrectionPrompt(ids)
	for _, id := range ids {
		if !strings.Contains(p, "- ["+id+"]\n") {
			t.Errorf("prompt does not list [%s]:\n%s", id, p)
		}
	}
	if c := strings.Count(p, "- [doc:42#p1]"); c != 1 {
		t.Errorf("doc:42#p1 listed %d times, want 1", c)
	}
	if !strings.Contains(p, "cite") || !strings.Contains(p, "square brackets") {
		t.Errorf("prompt does not ask for bracketed citations:\n%s", p)
	}

	empty := CorrectionPrompt(nil)
	if strings.Contains(empty, "- [") || !strings.Contains(empty, "No sources") {
		t.Errorf("CorrectionPrompt(nil) = %q", empty)
	}
}

type call struct {
	tool, args string
	allowed    bool
	reason     string
}

func TestLoopGuard(t *testing.T) {
	tests := []struct {
		name       string
		maxRepeats int
		allowed    []string
		calls      []call
	}{
		{
			name:    "allow list",
			allowed: []string{"search", "fetch"},
			calls: []call{
				{"search", `{}`, true, ""},
				{"fetch", `{}`, true, ""},
				{"delete", `{}`, false, ReasonToolNotAllowed},
				{"Search", `{}`, false, ReasonToolNotAllowed},
			},
		},
		{
			name:  "empty allow list allows nothing",
			calls: []call{{"search", `{}`, false, ReasonToolNotAllowed}},
		},
		{
			name:       "default max repeats is 2",
			maxRepeats: 0,
			allowed:    []string{"search"},
			calls: []call{
				{"search", `{"q":"go"}`, true, ""},
				{"search", `{"q":"go"}`, true, ""},
				{"search", `{"q":"go"}`, false, ReasonRepeatedCall},
				{"search", `{"q":"go"}`, false, ReasonRepeatedCall},
			},
		},
		{
			name:       "key order and whitespace do not matter",
			maxRepeats: 2,
			allowed:    []string{"search"},
			calls: []call{
				{"search", `{"q":"go","opts":{"a":1,"b":[1,2]}}`, true, ""},
				{"search", "{ \"opts\" : { \"b\" : [ 1 , 2 ], \"a\" : 1 },\n  \"q\" : \"go\" }", true, ""},
				{"search", `{"opts":{"b":[1,2],"a":1},"q":"go"}`, false, ReasonRepeatedCall},
			},
		},
		{
			name:       "different arguments or tools are not repeats",
			maxRepeats: 1,
			allowed:    []string{"search", "fetch"},
			calls: []call{
				{"search", `{"q":"go"}`, true, ""},
				{"search", `{"q":"rust"}`, true, ""},
				{"search", `{"q":"go","page":2}`, true, ""},
				{"search", `{"b":[2,1]}`, true, ""},
				{"search", `{"b":[1,2]}`, true, ""},
				{"fetch", `{"q":"go"}`, true, ""},
				{"search", `{"q":"go"}`, false, ReasonRepeatedCall},
			},
		},
		{
			name:       "invalid JSON compared raw",
			maxRepeats: 1,
			allowed:    []string{"search"},
			calls: []call{
				{"search", `{q: go}`, true, ""},
				{"search", `{q:  go}`, true, ""},
				{"search", `{"q":"go"} trailing`, true, ""},
				{"search", `{"q":"go"}`, true, ""},
				{"search", `{q: go}`, false, ReasonRepeatedCall},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewLoopGuard(tt.maxRepeats, tt.allowed)
			for i, c := range tt.calls {
				v := g.Check(c.tool, c.args)
				if v.Allowed != c.allowed || v.Reason != c.reason {
					t.Fatalf("call %d Check(%q, %q) = %+v; want allowed=%v reason=%q", i, c.tool, c.args, v, c.allowed, c.reason)
				}
				if v.Allowed != (v.Message == "") {
					t.Errorf("call %d: Message %q does not fit Allowed=%v", i, v.Message, v.Allowed)
				}
				if !v.Allowed && !strings.Contains(v.Message, c.tool) {
					t.Errorf("call %d: Message %q does not name the tool", i, v.Message)
				}
			}
		})
	}
}

func TestLoopGuardConcurrent(t *testing.T) {
	const maxRepeats, workers = 3, 32
	g := NewLoopGuard(maxRepeats, []string{"search"})
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		allowed int
	)
	for i := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// The same call spelled differently by each worker.
			args := fmt.Sprintf(`{"q":"go",%s"page":1}`, strings.Repeat(" ", i))
			if g.Check("search", args).Allowed {
				mu.Lock()
				allowed++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if allowed != maxRepeats {
		t.Fatalf("%d identical concurrent calls allowed, want %d", allowed, maxRepeats)
	}
}

func TestBound(t *testing.T) {
	const tr = TruncationMarker
	tests := []struct {
		name string
		in   string
		max  int
		want string
	}{
		{"no bound", "hello", 0, "hello"},
		{"negative no bound", "hello", -1, "hello"},
		{"fits exactly", "hello", 5, "hello"},
		{"ascii cut", "hello world", 5, "hello" + tr},
		{"two-byte rune kept whole", "héllo", 3, "hé" + tr}, // é is 2 bytes at 1..2
		{"two-byte rune not split", "héllo", 2, "h" + tr},   // cut would split é
		{"three-byte runes", "日本語テキスト", 7, "日本" + tr},       // 3 bytes each
		{"three-byte exact", "日本語テキスト", 6, "日本" + tr},
		{"four-byte rune", "a😀b", 4, "a" + tr}, // 😀 is 4 bytes at 1..4
		{"four-byte rune fits", "a😀b", 5, "a😀" + tr},
		{"cut before first rune", "😀😀", 3, "" + tr},
		{"empty", "", 3, ""},
		{"invalid utf8 does not loop", "\x80\x80\x80\x80\x80", 4, "\x80" + tr},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Bound(tt.in, tt.max)
			if got != tt.want {
				t.Fatalf("Bound(%q, %d) = %q, want %q", tt.in, tt.max, got, tt.want)
			}
			if utf8.ValidString(tt.in) && !utf8.ValidString(got) {
				t.Errorf("Bound(%q, %d) = %q is not valid UTF-8", tt.in, tt.max, got)
			}
			if tt.max > 0 && len(got) > tt.max+len(tr) {
				t.Errorf("Bound(%q, %d) is %d bytes, over the bound", tt.in, tt.max, len(got))
			}
		})
	}
}

func TestChainResult(t *testing.T) {
	r := defaultRedactor(t)
	tests := []struct {
		name  string
		chain Chain
		in    string
		want  string
		count int
	}{
		{"zero chain passes through", Chain{}, "key " + fakeSK, "key " + fakeSK, 0},
		{"redact only", Chain{Redactor: r}, "key " + fakeSK, "key [redacted:api_key]", 1},
		// Bounding first would cut the key below its minimum length and
		// leak its prefix unredacted.
		{"redact before bound", Chain{Redactor: r, MaxResultBytes: 12}, "key " + fakeSK + " and more text", "key [redacte" + TruncationMarker, 1},
		{"bound only", Chain{MaxResultBytes: 4}, "日本語", "日" + TruncationMarker, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, n := tt.chain.Result(tt.in)
			if got != tt.want || n != tt.count {
				t.Fatalf("Result(%q) = %q, %d; want %q, %d", tt.in, got, n, tt.want, tt.count)
			}
		})
	}
}

func TestChainAnswer(t *testing.T) {
	c := Chain{Redactor: defaultRedactor(t), MaxResultBytes: 5}
	e := evidence("doc:1")
	got, n := c.Answer("Mail ops@example.com [doc:1] or [doc:2].", e)
	want := Checked{
		Text:    "Mail [redacted:email] [doc:1] or.",
		Cited:   []string{"doc:1"},
		Removed: []string{"doc:2"},
	}
	if n != 1 || got.Text != want.Text || !slices.Equal(got.Cited, want.Cited) ||
		!slices.Equal(got.Removed, want.Removed) || got.NeedsCorrection {
		t.Fatalf("Answer = %+v, %d; want %+v, 1 (answers are not bounded)", got, n, want)
	}

	got, n = c.Answer("No sources here.", e)
	if !got.NeedsCorrection || n != 0 {
		t.Fatalf("Answer without citations = %+v, %d; want NeedsCorrection", got, n)
	}
}
