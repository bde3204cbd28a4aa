package handoff

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// SyntaxError reports a body that is not JSON at all. The HTTP layer answers 400.
type SyntaxError struct {
	// Offset counts the bytes read up to and including the one that broke
	// the JSON, as in encoding/json: the 1-based position of that byte.
	Offset int64
	line   int
	column int    // in bytes
	what   string // what went wrong there: "malformed JSON", "context_snapshot is not valid base64"
	reason string
}

// NewSyntaxError reports that body goes wrong at offset, counted as
// SyntaxError.Offset is: it stops being JSON there, or being what it claims
// to encode, such as base64.
func NewSyntaxError(body []byte, offset int64, reason string) *SyntaxError {
	return NewEncodingError(body, offset, "malformed JSON", reason)
}

// NewEncodingError is NewSyntaxError for a value that is JSON but not what
// it claims to encode: what says so ("context_snapshot is not valid base64").
func NewEncodingError(body []byte, offset int64, what, reason string) *SyntaxError {
	offset = min(max(offset, 0), int64(len(body)))
	before := string(body[:max(offset-1, 0)])
	return &SyntaxError{
		Offset: offset,
		line:   1 + strings.Count(before, "\n"),
		column: len(before) - strings.LastIndexByte(before, '\n'),
		what:   what,
		reason: reason,
	}
}

func (e *SyntaxError) Error() string {
	return fmt.Sprintf("%s at byte %d (line %d, column %d): %s", e.what, e.Offset, e.line, e.column, e.reason)
}

// FieldError is one problem with one field of a package.
type FieldError struct {
	// Field is the JSON path of the field, such as "contact.email",
	// "attempted_actions[1].tool" or "structured_entities.account_id";
	// "" for the body as a whole.
	Field string `json:"field"`
	// Rule names the broken rule for machines. From the JSON: "type" (wrong
	// JSON type, null included), "unknown_field", "empty" (an optional string
	// present but empty), "datetime" (not RFC 3339), "nul" (a string with
	// a NUL character, \u0000, which no text column holds). From the rules:
	// "required", "notblank", "max", "oneof", "email", "uri", "bcp47",
	// "iso4217", "schema_version", "handoff_id" (characters outside
	// A-Z a-z 0-9 _ . : -), "single_paragraph", "amount" (not a positive
	// decimal string), "visible_text" (a name holding an invisible or
	// reordering character, such as a right-to-left override) and "key" (a
	// map key outside the same characters or longer than 64).
	Rule string `json:"rule"`
	// Message says what is wrong in a sentence, for people.
	Message string `json:"message"`
}

// ValidationError reports a JSON body that breaks the package's rules. The HTTP
// layer answers 422 and lists Fields, which hold every problem found, sorted by
// field path.
type ValidationError struct {
	Fields []FieldError
	// Subject names what broke the rules when it is not a package, such as "message".
	Subject string
}

func (e *ValidationError) Error() string {
	messages := make([]string, len(e.Fields))
	for i, f := range e.Fields {
		messages[i] = f.Message
	}
	return "invalid handoff package: " + strings.Join(messages, "; ")
}

// MergeErrors combines the results of Decode, Validate and ValidateForQueue
// into one error, so that a client hears about every problem at once. It
// returns nil when all are nil, and the first error that is not a
// *ValidationError as it is, since that one is not about the package's fields.
// A field whose value had the wrong JSON type shadows the problems found
// inside it: they only restate that the value was unusable.
func MergeErrors(errs ...error) error {
	var fields []FieldError
	for _, err := range errs {
		if err == nil {
			continue
		}
		verr, ok := errors.AsType[*ValidationError](err)
		if !ok {
			return err
		}
		fields = append(fields, verr.Fields...)
	}
	return NewValidationError(fields)
}

// NewValidationError reports fields, sorted, as a *ValidationError, less
// those that a type error shadows as MergeErrors explains. It returns nil
// for no fields, so callers can return it as is.
func NewValidationError(fields []FieldError) error {
	fields = dropShadowed(fields)
	if len(fields) == 0 {
		return nil
	}
	slices.SortFunc(fields, func(a, b FieldError) int {
		if c := comparePaths(a.Field, b.Field); c != 0 {
			return c
		}
		if c := strings.Compare(a.Field, b.Field); c != 0 {
			return c
		}
		return strings.Compare(a.Rule, b.Rule)
	})
	return &ValidationError{Fields: slices.Compact(fields)}
}

func dropShadowed(fields []FieldError) []FieldError {
	var typeErrs []string
	for _, f := range fields {
		if f.Rule == RuleType {
			typeErrs = append(typeErrs, f.Field)
		}
	}
	return slices.DeleteFunc(fields, func(f FieldError) bool {
		return f.Rule != RuleType && slices.ContainsFunc(typeErrs, f.Within)
	})
}

// Within reports whether e is about the field at path or about something
// inside it: an error about contact.email is within contact, one about
// contact_id is not.
func (e FieldError) Within(path string) bool { return within(e.Field, path) }

// within reports whether path names parent or something inside it.
func within(path, parent string) bool {
	if parent == "" || path == parent {
		return true
	}
	rest, ok := strings.CutPrefix(path, parent)
	return ok && (rest[0] == '.' || rest[0] == '[')
}

// comparePaths orders field paths with list indexes compared as numbers, so
// that transcript[2] comes before transcript[10].
func comparePaths(a, b string) int {
	for a != "" && b != "" {
		na, nb := leadingDigits(a), leadingDigits(b)
		if na > 0 && nb > 0 {
			da := strings.TrimLeft(a[:na], "0")
			db := strings.TrimLeft(b[:nb], "0")
			if c := cmpLen(da, db); c != 0 {
				return c
			}
			if c := strings.Compare(da, db); c != 0 {
				return c
			}
			a, b = a[na:], b[nb:]
			continue
		}
		if a[0] != b[0] {
			return int(a[0]) - int(b[0])
		}
		a, b = a[1:], b[1:]
	}
	return cmpLen(a, b)
}

func leadingDigits(s string) int {
	n := 0
	for n < len(s) && s[n] >= '0' && s[n] <= '9' {
		n++
	}
	return n
}

func cmpLen(a, b string) int { return len(a) - len(b) }
