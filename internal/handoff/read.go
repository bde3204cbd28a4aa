package handoff

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/go-json-experiment/json/jsontext"
)

// Reader reads one JSON document value by value, checking each against the
// JSON type its caller expects. It is the one way bots' JSON is read: Decode
// reads packages with it, the sw4rm package SW4RM requests.
//
// A value of the wrong type, an unknown member or a broken rule becomes a
// FieldError named by the value's path, such as "attempted_actions[1].tool",
// and reading goes on, so that one answer lists every problem. Of a member
// given twice the last counts, as in encoding/json: the problems found in
// the earlier ones are dropped, and callers let a later value replace an
// earlier one.
//
// Reading stops at the first byte that is not JSON, and End then reports it;
// until End, what was read may come from a body that is not JSON.
type Reader struct {
	dec  *jsontext.Decoder
	body []byte
	err  error  // why the body is not JSON; reading stopped there
	path []byte // of the value being read

	problems []FieldError
	// object names the document in a complaint about an unknown member:
	// "the handoff package (schema v1)" unless DecodeObject says otherwise.
	object string
	// members lists the members of the objects being read, innermost
	// object last, so that a member given again can drop the problems of
	// the earlier one.
	members []memberProblems
	// beforeString is the offset in body where the search for the string
	// read last starts: the end of the token before it.
	beforeString int64
}

// memberProblems names a member of an object being read, whose value had
// the problems problems[start:end].
type memberProblems struct {
	name       string
	start, end int
}

// NewReader returns a Reader of body, which End expects to hold one JSON
// value.
func NewReader(body []byte) *Reader {
	return &Reader{body: body, dec: newDecoder(body)}
}

// newDecoder reads JSON as encoding/json does, to which the desk's clients
// are used: invalid UTF-8 in strings becomes U+FFFD, and names may repeat.
func newDecoder(body []byte) *jsontext.Decoder {
	return jsontext.NewDecoder(bytes.NewBuffer(body), jsontext.AllowInvalidUTF8(true), jsontext.AllowDuplicateNames(true))
}

// Kind reports the JSON type of the next value as jsontext spells it: 'n'
// for null, 'f' or 't' for a boolean, '"' for a string, '0' for a number,
// '[' for an array and '{' for an object; 0 once the body has turned out
// not to be JSON.
func (r *Reader) Kind() jsontext.Kind {
	if r.err != nil {
		return 0
	}
	switch k := r.dec.PeekKind(); k {
	case 'n', 'f', 't', '"', '0', '[', '{':
		return k
	}
	r.token() // to learn what is wrong
	return 0
}

// String reads a string. Any other value is recorded as not being want.
func (r *Reader) String(want string) (string, bool) {
	if r.Kind() != '"' {
		r.WrongType(want)
		return "", false
	}
	r.beforeString = r.dec.InputOffset()
	tok, ok := r.token()
	if !ok {
		return "", false
	}
	s := tok.String()
	r.checkText(s)
	return s, true
}

// checkText records a string that PostgreSQL cannot hold in a text column: one with a NUL
// character. Refusing it in every string, stored in such a column or not, keeps the rule one
// rule, and no one means a NUL in a package.
func (r *Reader) checkText(s string) {
	if strings.IndexByte(s, 0) >= 0 {
		r.Problem(RuleNUL, `contains a NUL character (\u0000), which the desk does not store`)
	}
}

// StringOffset returns the offset in the body of the opening quote of the
// string read last, for errors that point into it.
func (r *Reader) StringOffset() int64 {
	rest := r.body[r.beforeString:]
	return r.beforeString + int64(len(rest)-len(bytes.TrimLeft(rest, " \t\r\n:,")))
}

// Bool reads a boolean. Any other value is recorded as not being want.
func (r *Reader) Bool(want string) (bool, bool) {
	if k := r.Kind(); k != 't' && k != 'f' {
		r.WrongType(want)
		return false, false
	}
	tok, ok := r.token()
	return ok && tok.Bool(), ok
}

// Number reads a number, as written. Any other value is recorded as not
// being want.
func (r *Reader) Number(want string) (json.Number, bool) {
	if r.Kind() != '0' {
		r.WrongType(want)
		return "", false
	}
	tok, ok := r.token()
	if !ok {
		return "", false
	}
	return json.Number(tok.String()), true
}

// Object reads an object, calling member with the name of each member to
// read its value; a value that member leaves unread is skipped. Anything
// other than an object is recorded as not being want, and Object reports
// false.
func (r *Reader) Object(want string, member func(name string)) bool {
	if r.Kind() != '{' {
		r.WrongType(want)
		return false
	}
	r.token()
	parent, frame, problems := len(r.path), len(r.members), len(r.problems)
	for r.more() {
		tok, ok := r.token()
		if !ok {
			break
		}
		name := tok.String()
		if parent > 0 {
			r.path = append(r.path, '.')
		}
		r.path = append(r.path, name...)
		start := len(r.problems)
		member(name)
		if r.length()%2 == 1 { // the name without its value
			r.Skip()
		}
		r.members = append(r.members, memberProblems{name, start, len(r.problems)})
		r.path = r.path[:parent]
	}
	r.token()
	if len(r.problems) > problems {
		r.dropRepeated(r.members[frame:])
	}
	r.members = r.members[:frame]
	return true
}

// Array reads an array, calling item with the index of each item to read
// it; an item that item leaves unread is skipped. Anything other than an
// array is recorded as not being want, and Array reports false.
func (r *Reader) Array(want string, item func(i int)) bool {
	if r.Kind() != '[' {
		r.WrongType(want)
		return false
	}
	r.token()
	parent := len(r.path)
	for i := 0; r.more(); i++ {
		r.path = append(strconv.AppendInt(append(r.path, '['), int64(i), 10), ']')
		item(i)
		if r.length() == int64(i) {
			r.Skip()
		}
		r.path = r.path[:parent]
	}
	r.token()
	return true
}

// Value reads any value as encoding/json decodes it with UseNumber:
// map[string]any, []any, string, json.Number, bool or nil.
func (r *Reader) Value() any {
	switch r.Kind() {
	case '{':
		obj := map[string]any{}
		r.token()
		for r.more() {
			tok, ok := r.token()
			if !ok {
				break
			}
			name := tok.String()
			r.checkText(name)
			obj[name] = r.Value()
		}
		r.token()
		return obj
	case '[':
		items := []any{}
		r.token()
		for r.more() {
			items = append(items, r.Value())
		}
		r.token()
		return items
	}
	tok, ok := r.token()
	if !ok {
		return nil
	}
	switch tok.Kind() {
	case '"':
		r.checkText(tok.String())
		return tok.String()
	case '0':
		return json.Number(tok.String())
	case 't', 'f':
		return tok.Bool()
	}
	return nil
}

// Skip reads the next value and drops it.
func (r *Reader) Skip() {
	if r.err == nil {
		r.err = r.dec.SkipValue()
	}
}

// WrongType records that the next value is not want, such as "a string",
// and skips it.
func (r *Reader) WrongType(want string) {
	r.wrongType(r.Kind(), want)
	r.Skip()
}

// wrongType records that a value of kind k is not want.
func (r *Reader) wrongType(k jsontext.Kind, want string) {
	r.Problem(RuleType, "must be "+want+", not "+kindName(k))
}

// Unknown records that the member being read is not a field of what, such
// as "the handoff package (schema v1)", and skips its value.
func (r *Reader) Unknown(what string) {
	r.Problem(ruleUnknownField, "is not a field of "+what)
	r.Skip()
}

// Problem records that the value being read breaks rule. The message is
// the value's path followed by complaint, such as "must not be blank".
func (r *Reader) Problem(rule, complaint string) {
	path := string(r.path)
	subject := path
	if path == "" && r.err == nil && r.dec.StackDepth() == 0 { // the document itself, rather than a member named ""
		subject = "the body"
	}
	r.problems = append(r.problems, FieldError{Field: path, Rule: rule, Message: subject + " " + complaint})
}

// End checks that nothing but spaces follow the value read, and returns a
// *SyntaxError when the body is not JSON.
func (r *Reader) End() error {
	if r.err == nil {
		_, err := r.dec.ReadToken()
		if err == io.EOF {
			return nil
		}
		r.err = cmp.Or(err, errAfterValue)
	}
	return r.syntaxError()
}

// errAfterValue is why End refuses a second value after the first, where
// jsontext sees a stream of values.
var errAfterValue = errors.New("jsontext: a value after the top-level value")

// Problems returns the problems found, unsorted.
func (r *Reader) Problems() []FieldError { return r.problems }

// ReadEmbedded reads doc with read, as the value just read: doc is the JSON
// document that value carried encoded, and how tells how it came out, such
// as "after base64 decoding". Problems inside doc are named by paths under
// the value's. When doc is not JSON, ReadEmbedded drops them and returns a
// *SyntaxError whose offset counts in doc.
func (r *Reader) ReadEmbedded(doc []byte, how string, read func()) error {
	dec, body, problems := r.dec, r.body, len(r.problems)
	r.dec, r.body = newDecoder(doc), doc
	read()
	err := r.End()
	r.dec, r.body, r.err = dec, body, nil
	if serr, ok := errors.AsType[*SyntaxError](err); ok {
		r.problems = r.problems[:problems]
		serr.reason = "in " + string(r.path) + " " + how + ": " + serr.reason
	}
	return err
}

// syntaxError says where the body stops being JSON in encoding/json's words
// and offsets, which the API has always answered with.
func (r *Reader) syntaxError() *SyntaxError {
	if serr, ok := errors.AsType[*json.SyntaxError](json.Unmarshal(r.body, new(any))); ok {
		return NewSyntaxError(r.body, serr.Offset, serr.Error())
	}
	// encoding/json takes what jsontext refused; jsontext then says why.
	offset := int64(len(r.body))
	if serr, ok := errors.AsType[*jsontext.SyntacticError](r.err); ok {
		offset = serr.ByteOffset + 1
	}
	return NewSyntaxError(r.body, offset, r.err.Error())
}

// token reads the next token, and reports false once the body has turned
// out not to be JSON.
func (r *Reader) token() (jsontext.Token, bool) {
	if r.err != nil {
		return jsontext.Token{}, false
	}
	tok, err := r.dec.ReadToken()
	if err != nil {
		r.err = err
		return jsontext.Token{}, false
	}
	return tok, true
}

// more reports whether another member or item follows in the object or
// array being read.
func (r *Reader) more() bool {
	if r.err != nil {
		return false
	}
	switch r.dec.PeekKind() {
	case '}', ']':
		return false
	case 0:
		r.token() // to learn what is wrong
		return false
	}
	return true
}

// dropRepeated drops the problems of the members of one object that a
// member of the same name replaced.
func (r *Reader) dropRepeated(members []memberProblems) {
	slices.SortStableFunc(members, func(a, b memberProblems) int { return strings.Compare(a.name, b.name) })
	var replaced []memberProblems
	for i, m := range members[:max(len(members)-1, 0)] {
		if m.name == members[i+1].name && m.end > m.start {
			replaced = append(replaced, m)
		}
	}
	if len(replaced) == 0 {
		return
	}
	slices.SortFunc(replaced, func(a, b memberProblems) int { return a.start - b.start })
	kept := r.problems[:replaced[0].start]
	for i, m := range replaced {
		next := len(r.problems)
		if i+1 < len(replaced) {
			next = replaced[i+1].start
		}
		kept = append(kept, r.problems[m.end:next]...)
	}
	r.problems = kept
}

// length counts the tokens read of the object or array being read, names
// included, or returns -1 once the body has turned out not to be JSON.
func (r *Reader) length() int64 {
	if r.err != nil {
		return -1
	}
	_, n := r.dec.StackIndex(r.dec.StackDepth())
	return n
}

// kindName names a JSON type for messages.
func kindName(k jsontext.Kind) string {
	switch k {
	case 'n':
		return "null"
	case '"':
		return "a string"
	case '0':
		return "a number"
	case 't', 'f':
		return "a boolean"
	case '[':
		return "an array"
	}
	return "an object"
}
