package room

import (
	"encoding/base64"
	"errors"
	"math"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/turngate/turngate/errcode"
)

// FuzzDecodeCursor: the conversations cursor is opaque and the server only
// hands out encodeCursor's spelling, so decodeCursor accepts exactly that
// spelling (encode(decode(s)) == s) and answers everything else, whatever
// the bytes, with BAD_USER_INPUT on "after" and never another error.
//
// The committed corpus (testdata/fuzz/FuzzDecodeCursor) holds the literal
// nasties: NUL bytes, invalid UTF-8, padding and standard-alphabet
// variants, line breaks. The seeds below are cursor payloads, encoded
// here so that they get past base64 to the time and UUID parsers.
func FuzzDecodeCursor(f *testing.F) {
	at := time.Date(2026, 3, 4, 5, 6, 7, 123456000, time.UTC)
	id := uuid.MustParse("0196a0e2-7b1c-7c3e-9f00-5a5a5a5a5a5a")
	f.Add(encodeCursor(at, id))
	f.Add(encodeCursor(time.Time{}, uuid.Nil))
	f.Add(encodeCursor(time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC), uuid.Max))
	for _, raw := range []string{
		"",
		"|",
		"||",
		"2026-03-04T05:06:07.123456Z",
		"2026-03-04T05:06:07.123456Z|",
		"|0196a0e2-7b1c-7c3e-9f00-5a5a5a5a5a5a",
		"2026-03-04T05:06:07.123456Z|0196a0e2-7b1c-7c3e-9f00-5a5a5a5a5a5a|",
		// Other spellings of a valid position.
		"2026-03-04T05:06:07.123456000Z|0196a0e2-7b1c-7c3e-9f00-5a5a5a5a5a5a",
		"2026-03-04T05:06:07,123456Z|0196a0e2-7b1c-7c3e-9f00-5a5a5a5a5a5a",
		"2026-03-04T06:06:07.123456+01:00|0196a0e2-7b1c-7c3e-9f00-5a5a5a5a5a5a",
		"2026-03-04T05:06:07.123456Z|0196A0E2-7B1C-7C3E-9F00-5A5A5A5A5A5A",
		"2026-03-04T05:06:07.123456Z|{0196a0e2-7b1c-7c3e-9f00-5a5a5a5a5a5a}",
		"2026-03-04T05:06:07.123456Z|urn:uuid:0196a0e2-7b1c-7c3e-9f00-5a5a5a5a5a5a",
		"2026-03-04T05:06:07.123456Z|0196a0e27b1c7c3e9f005a5a5a5a5a5a",
		// Times at and past the edges of RFC 3339.
		"0000-01-01T00:00:00Z|00000000-0000-0000-0000-000000000000",
		"-0001-01-01T00:00:00Z|00000000-0000-0000-0000-000000000000",
		"10000-01-01T00:00:00Z|00000000-0000-0000-0000-000000000000",
		"2026-03-04T05:06:60Z|00000000-0000-0000-0000-000000000000",
		"2026-03-04T24:00:00Z|00000000-0000-0000-0000-000000000000",
		"2026-02-30T00:00:00Z|00000000-0000-0000-0000-000000000000",
		"2026-03-04T05:06:07.1234567890123Z|00000000-0000-0000-0000-000000000000",
		"9223372036854775807|00000000-0000-0000-0000-000000000000",
		"-9223372036854775808|00000000-0000-0000-0000-000000000000",
		"2026-03-04T05:06:07Z\x00|00000000-0000-0000-0000-000000000000",
		"2026-03-04T05:06:07Z|\xff\xfe",
	} {
		f.Add(base64.RawURLEncoding.EncodeToString([]byte(raw)))
	}
	f.Fuzz(func(t *testing.T, s string) {
		at, id, err := decodeCursor(s)
		if err != nil {
			e, ok := errcode.From(err)
			if !ok || e.Code != errcode.BadUserInput || e.Field != "after" || !errors.Is(err, errcode.ErrBadUserInput) {
				t.Fatalf("decodeCursor(%q): %#v, want BAD_USER_INPUT on after", s, err)
			}
			if !at.IsZero() || id != uuid.Nil {
				t.Fatalf("decodeCursor(%q) failed but returned %v, %v", s, at, id)
			}
			return
		}
		if got := encodeCursor(at, id); got != s {
			t.Fatalf("decodeCursor(%q) = %v, %v, which encodes as %q: a second spelling of one position", s, at, id, got)
		}
	})
}

// FuzzCursorRoundTrip: every position List can hand out decodes back to
// itself. Positions are a membership's created_at and id; created_at is a
// timestamptz, so its year lies in 1..9999 (RFC 3339 cannot spell others).
func FuzzCursorRoundTrip(f *testing.F) {
	id := uuid.MustParse("0196a0e2-7b1c-7c3e-9f00-5a5a5a5a5a5a")
	f.Add(time.Date(2026, 3, 4, 5, 6, 7, 123456000, time.UTC).Unix(), int64(123456000), id[:])
	f.Add(int64(0), int64(0), uuid.Nil[:])
	f.Add(int64(-1), int64(999999999), uuid.Max[:])
	f.Add(time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC).Unix(), int64(1), []byte{1, 2, 3})
	f.Add(time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC).Unix(), int64(999999999), []byte{})
	f.Add(int64(math.MaxInt64), int64(math.MinInt64), make([]byte, 32))
	minSec := time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC).Unix()
	maxSec := time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC).Unix()
	f.Fuzz(func(t *testing.T, sec, nsec int64, idBytes []byte) {
		if sec < minSec || sec > maxSec {
			t.Skip("outside the years a timestamptz column holds")
		}
		var want uuid.UUID
		copy(want[:], idBytes)
		// Any zone: encodeCursor writes the instant in UTC.
		at := time.Unix(sec, nsec%1e9).In(time.FixedZone("", int(nsec%(14*3600))))
		if y := at.UTC().Year(); y < 1 || y > 9999 {
			t.Skip("outside the years a timestamptz column holds")
		}
		s := encodeCursor(at, want)
		gotAt, gotID, err := decodeCursor(s)
		if err != nil {
			t.Fatalf("decodeCursor(encodeCursor(%v, %v) = %q): %v", at, want, s, err)
		}
		if !gotAt.Equal(at) || gotID != want {
			t.Fatalf("decodeCursor(encodeCursor(%v, %v)) = %v, %v", at, want, gotAt, gotID)
		}
	})
}
