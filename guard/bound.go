package guard

import "unicode/utf8"

// TruncationMarker is appended to text cut by [Bound].
const TruncationMarker = "… [truncated]"

// Bound returns s if it fits in maxBytes bytes, or if maxBytes <= 0.
// Otherwise it cuts s to at most maxBytes bytes, on a UTF-8 rune boundary,
// and appends [TruncationMarker]; the result is then at most
// maxBytes+len(TruncationMarker) bytes long.
func Bound(s string, maxBytes int) string {
	if maxBytes <= 0 || len(s) <= maxBytes {
		return s
	}
	cut := maxBytes
	// A rune is at most utf8.UTFMax bytes, so in valid UTF-8 a rune starts
	// within the last utf8.UTFMax-1 bytes before the cut.
	for cut > 0 && cut > maxBytes-(utf8.UTFMax-1) && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + TruncationMarker
}
