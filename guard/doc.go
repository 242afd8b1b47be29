// Package guard is the guardrail chain the backend applies to text crossing
// a trust boundary: before a tool result returns to the model, and again
// before an answer is published or an external effect happens.
//
// It is pure computation — no database, no network — and has four parts:
//
//   - [Redactor] replaces secrets and personal data (emails, API keys,
//     tokens, private keys) with "[redacted:<name>]" markers.
//   - [CheckCitations] keeps the bracketed source ids an answer cites that
//     were actually retrieved in the turn ([Evidence]), removes invented
//     ones, and says when a correction step ([CorrectionPrompt]) is due.
//   - [LoopGuard] refuses tools outside the run's allow-list and calls
//     repeated with identical arguments.
//   - [Bound] cuts text to a byte budget on a UTF-8 rune boundary.
//
// [Chain] ties redaction, bounding and citation checking together in the
// order the backend applies them.
//
// # What it must not import
//
// guard is a leaf: it imports no package of this module. The callback host,
// the runner and graph apply its checks to what they hold.
package guard

// Chain is the guardrail chain for one run. The zero value redacts nothing
// and bounds nothing.
type Chain struct {
	// Redactor redacts tool results and answers; nil redacts nothing.
	Redactor *Redactor
	// MaxResultBytes bounds a tool result after redaction; <= 0 means no
	// bound. See [Bound].
	MaxResultBytes int
}

// Result prepares a tool result for the model: it redacts first, so a
// secret straddling the cut cannot leak a prefix, then bounds. It returns
// the text and the number of redactions.
func (c Chain) Result(s string) (out string, redactions int) {
	out, redactions = c.Redactor.Redact(s)
	return Bound(out, c.MaxResultBytes), redactions
}

// Answer prepares an answer for publication: it checks citations against e
// (see [CheckCitations]) and then redacts the checked text. It returns the
// checked answer, whose Text is redacted, and the number of redactions.
func (c Chain) Answer(answer string, e *Evidence) (Checked, int) {
	checked := CheckCitations(answer, e)
	var n int
	checked.Text, n = c.Redactor.Redact(checked.Text)
	return checked, n
}
