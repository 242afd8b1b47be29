package guard

import (
	"regexp"
	"strings"
	"sync"
)

// citation matches a bracketed source id such as [doc:42#p1],
// [turn:<uuid>] or [artifact:<uuid>]; submatch 1 is the id.
var citation = regexp.MustCompile(`\[((?:doc|turn|artifact):[A-Za-z0-9_.#:-]+)\]`)

// Evidence is the set of source ids retrieved in one turn. The zero value
// is empty and ready to use; it is safe for concurrent use and must not be
// copied after first use. The read methods also work on a nil *Evidence,
// which holds nothing.
type Evidence struct {
	mu  sync.RWMutex
	ids []string
	set map[string]struct{}
}

// Add records ids, written without brackets ("doc:42#p1"); surrounding
// brackets and whitespace are tolerated and stripped. Empty ids and ids
// already present are ignored.
func (e *Evidence) Add(ids ...string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.set == nil {
		e.set = make(map[string]struct{})
	}
	for _, id := range ids {
		id = normalizeID(id)
		if _, ok := e.set[id]; ok || id == "" {
			continue
		}
		e.set[id] = struct{}{}
		e.ids = append(e.ids, id)
	}
}

// Has reports whether id (without brackets) was retrieved.
func (e *Evidence) Has(id string) bool {
	if e == nil {
		return false
	}
	e.mu.RLock()
	defer e.mu.RUnlock()
	_, ok := e.set[id]
	return ok
}

// Len returns the number of distinct ids.
func (e *Evidence) Len() int {
	if e == nil {
		return 0
	}
	e.mu.RLock()
	defer e.mu.RUnlock()
	return len(e.ids)
}

// IDs returns a copy of the ids in insertion order, without duplicates.
func (e *Evidence) IDs() []string {
	if e == nil {
		return nil
	}
	e.mu.RLock()
	defer e.mu.RUnlock()
	return append([]string(nil), e.ids...)
}

func normalizeID(id string) string {
	id = strings.TrimSpace(id)
	if strings.HasPrefix(id, "[") && strings.HasSuffix(id, "]") {
		id = strings.TrimSpace(id[1 : len(id)-1])
	}
	return id
}

// Checked is the outcome of [CheckCitations].
type Checked struct {
	// Text is the answer with unknown citations removed.
	Text string
	// Cited lists the known ids cited, in order of first appearance,
	// without duplicates.
	Cited []string
	// Removed lists the unknown ids removed, in order of first appearance,
	// without duplicates (every occurrence is removed from Text).
	Removed []string
	// NeedsCorrection is true when evidence exists but the answer cites
	// none of it; the caller should run one correction step with
	// [CorrectionPrompt].
	NeedsCorrection bool
}

// CheckCitations checks the bracketed citations in answer against e. A
// citation of an id in e is kept. Any other citation was not retrieved in
// this turn and is removed together with one adjacent space, chosen so the
// text stays readable: "claim [doc:x]." becomes "claim.", "[doc:x] Claim"
// becomes "Claim" and "a [doc:x] b" becomes "a b". With no evidence (e nil
// or empty) every citation is removed and no correction is needed.
func CheckCitations(answer string, e *Evidence) Checked {
	var c Checked
	seen := make(map[string]bool)
	out := make([]byte, 0, len(answer))
	last := 0
	for _, m := range citation.FindAllStringSubmatchIndex(answer, -1) {
		id := answer[m[2]:m[3]]
		if e.Has(id) {
			if !seen[id] {
				seen[id] = true
				c.Cited = append(c.Cited, id)
			}
			continue // kept: copied with the text that follows
		}
		if !seen[id] {
			seen[id] = true
			c.Removed = append(c.Removed, id)
		}
		out = append(out, answer[last:m[0]]...)
		last = m[1]
		var before, after byte // 0 means start or end of text
		if len(out) > 0 {
			before = out[len(out)-1]
		}
		if last < len(answer) {
			after = answer[last]
		}
		switch {
		case isBlank(before) && (after == 0 || isSpace(after) || isClosing(after)):
			out = out[:len(out)-1] // "claim [x]." -> "claim."
		case isBlank(after) && (before == 0 || before == '\n' || isOpening(before)):
			last++ // "[x] Claim" -> "Claim"
		}
	}
	if last == 0 {
		c.Text = answer
	} else {
		c.Text = string(append(out, answer[last:]...))
	}
	c.NeedsCorrection = e.Len() > 0 && len(c.Cited) == 0
	return c
}

// isBlank reports a space or tab, the only characters removed next to a
// citation; line breaks are kept.
func isBlank(b byte) bool { return b == ' ' || b == '\t' }

func isSpace(b byte) bool { return isBlank(b) || b == '\n' || b == '\r' }

func isClosing(b byte) bool { return strings.IndexByte(".,;:!?)]}", b) >= 0 }

func isOpening(b byte) bool { return strings.IndexByte("([{", b) >= 0 }

// CorrectionPrompt returns the instruction for one correction step after
// [CheckCitations] reported NeedsCorrection: the answer must cite the
// sources it used by their bracketed ids, chosen from available (ids as
// given to [Evidence.Add]; [Evidence.IDs] is the usual argument).
func CorrectionPrompt(available []string) string {
	var b strings.Builder
	b.WriteString("Your answer does not cite the sources it used. ")
	seen := make(map[string]bool)
	var ids []string
	for _, id := range available {
		if id = normalizeID(id); id != "" && !seen[id] {
			seen[id] = true
			ids = append(ids, id)
		}
	}
	if len(ids) == 0 {
		b.WriteString("No sources are available in this turn: rewrite the answer without any bracketed citations.")
		return b.String()
	}
	b.WriteString("Rewrite it so that every statement taken from a source is followed by that source's id in square brackets, copied exactly as listed below, for example [")
	b.WriteString(ids[0])
	b.WriteString("]. Cite only these ids; never invent one. Keep the content of the answer otherwise unchanged.\n\nAvailable sources:\n")
	for _, id := range ids {
		b.WriteString("- [")
		b.WriteString(id)
		b.WriteString("]\n")
	}
	return b.String()
}
