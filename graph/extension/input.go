package extension

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/99designs/gqlgen/graphql"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/gqlerror"

	"github.com/turngate/turngate/errcode"
)

// One validation path for every string a client sends, at the edge:
//
//   - CheckRawJSON refuses the raw JSON of a request (an HTTP body, a
//     WebSocket message, a GET parameter) that is not valid UTF-8 or
//     escapes a lone UTF-16 surrogate; encoding/json would silently turn
//     either into U+FFFD and the server would store text nobody sent.
//   - InputCheck refuses, in an operation's variables and in the string
//     literals of its document, a string with a NUL (Postgres cannot
//     store it) or invalid UTF-8.
//   - The validator's notblank refuses text a person cannot see: only
//     spaces, control and format characters (zero-width spaces, joiners,
//     BOMs, ...).

// CheckRawJSON checks a request's raw JSON text.
func CheckRawJSON(raw []byte) error {
	if !utf8.Valid(raw) {
		return errcode.New(errcode.BadUserInput, "the request is not valid UTF-8")
	}
	if i := loneSurrogate(raw); i >= 0 {
		return errcode.New(errcode.BadUserInput, "the request escapes a lone UTF-16 surrogate at byte %d; send the character itself or a valid surrogate pair", i)
	}
	return nil
}

// loneSurrogate returns the offset of the first \uXXXX escape of a UTF-16
// surrogate that is not part of a high-low pair, or -1. It reads escapes
// only inside JSON strings and skips escaped backslashes.
func loneSurrogate(raw []byte) int {
	inString := false
	for i := 0; i < len(raw); i++ {
		c := raw[i]
		if !inString {
			if c == '"' {
				inString = true
			}
			continue
		}
		switch c {
		case '"':
			inString = false
		case '\\':
			if i+1 >= len(raw) {
				return -1
			}
			if raw[i+1] != 'u' {
				i++ // \" \\ \n ...
				continue
			}
			r, ok := hex4(raw, i+2)
			if !ok {
				i++
				continue
			}
			switch {
			case r >= 0xD800 && r <= 0xDBFF:
				// A high surrogate must be followed by a low one.
				if i+11 < len(raw) && raw[i+6] == '\\' && raw[i+7] == 'u' {
					if lo, ok := hex4(raw, i+8); ok && lo >= 0xDC00 && lo <= 0xDFFF {
						i += 11
						continue
					}
				}
				return i
			case r >= 0xDC00 && r <= 0xDFFF:
				return i
			}
			i += 5
		}
	}
	return -1
}

func hex4(raw []byte, at int) (rune, bool) {
	if at+4 > len(raw) {
		return 0, false
	}
	var r rune
	for _, c := range raw[at : at+4] {
		var d byte
		switch {
		case '0' <= c && c <= '9':
			d = c - '0'
		case 'a' <= c && c <= 'f':
			d = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			d = c - 'A' + 10
		default:
			return 0, false
		}
		r = r<<4 | rune(d)
	}
	return r, true
}

// CheckString refuses a string argument that holds a NUL or invalid
// UTF-8. path names the argument for the error.
func CheckString(path, s string) error {
	if !utf8.ValidString(s) {
		return errcode.Invalid(path, "%s is not valid UTF-8", path)
	}
	if strings.IndexByte(s, 0) >= 0 {
		return errcode.Invalid(path, "%s must not contain NUL characters", path)
	}
	return nil
}

// Visible reports whether s has a character a person can see: anything
// but spaces, control and format characters (zero-width space and
// joiners, word joiner, BOM, bidi marks, ...) and the blank fillers.
func Visible(s string) bool {
	for _, r := range s {
		switch {
		case unicode.IsSpace(r), unicode.IsControl(r), unicode.Is(unicode.Cf, r),
			unicode.Is(unicode.Zs, r), unicode.Is(unicode.Zl, r), unicode.Is(unicode.Zp, r):
		case r == '\u115F', r == '\u1160', r == '\u3164', r == '\uFFA0', r == '\u2800', r == '\u180E':
			// Hangul fillers, the braille blank and the Mongolian vowel
			// separator render as nothing.
		default:
			return true
		}
	}
	return false
}

// InputCheck is the gqlgen extension that checks every string an
// operation carries, before anything resolves: its variables and the
// string literals of its document (arguments, defaults, directives).
type InputCheck struct{}

var (
	_ graphql.HandlerExtension        = InputCheck{}
	_ graphql.OperationContextMutator = InputCheck{}
)

func (InputCheck) ExtensionName() string                   { return "InputCheck" }
func (InputCheck) Validate(graphql.ExecutableSchema) error { return nil }

func (InputCheck) MutateOperationContext(ctx context.Context, rc *graphql.OperationContext) *gqlerror.Error {
	err := CheckValue("", rc.Variables)
	if err == nil && rc.Doc != nil {
		err = checkDocument(rc.Doc)
	}
	if err != nil {
		e, _ := errcode.From(err)
		return &gqlerror.Error{Message: e.Message, Err: e}
	}
	return nil
}

// CheckValue checks every string inside v (decoded variables: strings,
// lists, objects), keys included, in a stable order.
func CheckValue(path string, v any) error {
	switch v := v.(type) {
	case string:
		return CheckString(path, v)
	case []any:
		for i, e := range v {
			if err := CheckValue(fmt.Sprintf("%s[%d]", path, i), e); err != nil {
				return err
			}
		}
	case map[string]any:
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		sort.Strings(keys) // the first bad value is the same every time
		for _, k := range keys {
			p := k
			if path != "" {
				p = path + "." + k
			}
			if err := CheckString(p, k); err != nil {
				return err
			}
			if err := CheckValue(p, v[k]); err != nil {
				return err
			}
		}
	}
	return nil
}

// checkDocument checks the string literals of a query document. The
// parser has already bounded its size.
func checkDocument(doc *ast.QueryDocument) error {
	var walkValue func(v *ast.Value) error
	walkValue = func(v *ast.Value) error {
		if v == nil {
			return nil
		}
		if v.Kind == ast.StringValue || v.Kind == ast.BlockValue {
			if err := CheckString("query", v.Raw); err != nil {
				return err
			}
		}
		for _, c := range v.Children {
			if err := walkValue(c.Value); err != nil {
				return err
			}
		}
		return nil
	}
	walkArgs := func(args ast.ArgumentList, dirs ast.DirectiveList) error {
		for _, a := range args {
			if err := walkValue(a.Value); err != nil {
				return err
			}
		}
		for _, d := range dirs {
			for _, a := range d.Arguments {
				if err := walkValue(a.Value); err != nil {
					return err
				}
			}
		}
		return nil
	}
	var walkSet func(set ast.SelectionSet) error
	walkSet = func(set ast.SelectionSet) error {
		for _, sel := range set {
			switch sel := sel.(type) {
			case *ast.Field:
				if err := walkArgs(sel.Arguments, sel.Directives); err != nil {
					return err
				}
				if err := walkSet(sel.SelectionSet); err != nil {
					return err
				}
			case *ast.InlineFragment:
				if err := walkArgs(nil, sel.Directives); err != nil {
					return err
				}
				if err := walkSet(sel.SelectionSet); err != nil {
					return err
				}
			case *ast.FragmentSpread:
				if err := walkArgs(nil, sel.Directives); err != nil {
					return err
				}
			}
		}
		return nil
	}
	for _, op := range doc.Operations {
		for _, v := range op.VariableDefinitions {
			if err := walkValue(v.DefaultValue); err != nil {
				return err
			}
		}
		if err := walkArgs(nil, op.Directives); err != nil {
			return err
		}
		if err := walkSet(op.SelectionSet); err != nil {
			return err
		}
	}
	for _, f := range doc.Fragments {
		if err := walkArgs(nil, f.Directives); err != nil {
			return err
		}
		if err := walkSet(f.SelectionSet); err != nil {
			return err
		}
	}
	return nil
}
