package handoff

import (
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/handoffdesk/desk/internal/auth"
)

// Masked is the placeholder for a value the receiver may not see.
const Masked = "•••"

// FlagPIIRedacted is the privacy flag by which a bot vouches that its free text (problem
// statement, next step, draft reply and the rest) names nobody.
const FlagPIIRedacted = "pii_redacted_in_summary"

// PIIRule is a queue's rule for personal data: the least role that sees it unmasked, the entity
// keys that count as PII, and whether roles below MinRole get the transcript masked (the default)
// or not at all.
type PIIRule struct {
	MinRole            string
	EntityKeys         []string
	WithholdTranscript bool
}

// Visibility is what one receiver may see of packages in one queue.
type Visibility struct {
	PII           bool     // contact details, transcript and PII entities unmasked
	PIIEntityKeys []string // the queue's entity keys that count as PII
	// WithholdTranscript drops the transcript rather than masking it (PII is false).
	WithholdTranscript bool
}

// VisibilityFor is the desk's one answer to "what of this queue's packages may this role see
// unmasked": every page, frame, export and notification asks it before rendering or encoding.
func VisibilityFor(role auth.Role, rule PIIRule) Visibility {
	pii := role.AtLeast(auth.Role(rule.MinRole))
	return Visibility{PII: pii, PIIEntityKeys: rule.EntityKeys, WithholdTranscript: !pii && rule.WithholdTranscript}
}

// Field names for what a receiver was shown unmasked (Unmasked); a PII entity is "entity:" and
// its key.
const (
	FieldName       = "name"
	FieldEmail      = "email"
	FieldPhone      = "phone"
	FieldTranscript = "transcript"
)

// Unmasked lists the personal fields of p that v shows unmasked: none when v masks them. p is
// what the receiver's view holds (a card holds the name and a few entities, the package page all
// of it), so the list says what was shown, for the record of PII reads.
func (v Visibility) Unmasked(p Package) []string {
	if !v.PII {
		return nil
	}
	var fields []string
	for _, f := range []struct{ name, value string }{
		{FieldName, p.Contact.DisplayName}, {FieldEmail, p.Contact.Email}, {FieldPhone, p.Contact.Phone},
	} {
		if f.value != "" {
			fields = append(fields, f.name)
		}
	}
	if len(p.Transcript) > 0 {
		fields = append(fields, FieldTranscript)
	}
	for _, k := range presentKeys(p, v.PIIEntityKeys) {
		fields = append(fields, "entity:"+k)
	}
	return fields
}

// MaskFor returns a copy of p with what v may not see replaced, so that masked values never
// reach a view, a websocket frame or an export.
//
// Masking the contact alone is not enough: a draft reply that says "Hi Dana" names the customer
// the card shows as "D. W.". So unless the bot vouched that its text names nobody
// (FlagPIIRedacted; a package without the flag has vouched for nothing), the contact's name,
// email and phone, and the values of the queue's PII entities, are masked wherever the free text
// mentions them too, as the contact itself is: see mentionsOf for what counts as a mention.
//
// The transcript is the customer's own words, for which no bot can vouch: it is kept, collapsed
// on the page, with every such mention masked in each turn, unless the queue withholds it.
func (p Package) MaskFor(v Visibility) Package {
	if v.PII {
		return p
	}
	all := piiMentionsOf(p, v.PIIEntityKeys)
	var m mentions
	if !p.PrivacyFlags[FlagPIIRedacted] {
		m = all
	}
	p.Contact.DisplayName = maskName(p.Contact.DisplayName)
	p.Contact.Email = maskEmail(p.Contact.Email)
	p.Contact.Phone = maskPhone(p.Contact.Phone)
	if v.WithholdTranscript {
		p.Transcript = nil
	} else if len(p.Transcript) > 0 {
		turns := make([]Turn, len(p.Transcript))
		for i, t := range p.Transcript {
			t.Content = all.mask(t.Content)
			turns[i] = t
		}
		p.Transcript = turns
	}
	m.maskFreeText(&p)
	if len(p.StructuredEntities) > 0 {
		entities := make(map[string]EntityValue, len(p.StructuredEntities))
		for k, val := range p.StructuredEntities {
			if slices.Contains(v.PIIEntityKeys, k) {
				val = StringEntity(Masked)
			} else {
				val = m.maskEntity(val)
			}
			entities[k] = val
		}
		p.StructuredEntities = entities
	}
	return p
}

// piiMentionsOf is mentionsOf p's contact, plus the values of its PII entities (keys), each
// masked whole.
func piiMentionsOf(p Package, keys []string) mentions {
	m := mentionsOf(p.Contact)
	add := func(text string) {
		if utf8.RuneCountInString(text) >= minEntityRunes {
			m.words = append(m.words, mention{text, Masked})
		}
	}
	for _, k := range keys {
		if val, ok := p.StructuredEntities[k]; ok {
			for _, text := range entityTexts(val) {
				add(text)
			}
		}
	}
	slices.SortStableFunc(m.words, func(a, b mention) int { return len(b.text) - len(a.text) })
	return m
}

// maskFreeText masks the mentions in every field of p the bot wrote in its own words: the one list
// of them, so that masking and redaction reach the same fields.
func (m mentions) maskFreeText(p *Package) {
	p.Reason = m.mask(p.Reason)
	p.ProblemStatement = m.mask(p.ProblemStatement)
	p.RecommendedNextStep = m.mask(p.RecommendedNextStep)
	p.DraftReply = m.mask(p.DraftReply)
	p.OpenQuestions = m.maskAll(p.OpenQuestions)
	p.Citations = m.maskAll(p.Citations)
	if len(p.AttemptedActions) > 0 {
		acts := make([]AttemptedAction, len(p.AttemptedActions))
		for i, a := range p.AttemptedActions {
			a.Result = m.mask(a.Result)
			acts[i] = a
		}
		p.AttemptedActions = acts
	}
}

// MaskNoteFor masks a note the desk's users wrote about p for v, as MaskFor masks p's own free
// text. The bot's flag does not apply: it vouches for the bot's text, and a note may come from
// someone who saw the contact unmasked.
func (p Package) MaskNoteFor(v Visibility, note string) string {
	return p.NoteMaskFor(v)(note)
}

// NoteMaskFor is MaskNoteFor for many notes about p: it finds the contact's mentions once.
func (p Package) NoteMaskFor(v Visibility) func(note string) string {
	if v.PII {
		return func(note string) string { return note }
	}
	return piiMentionsOf(p, v.PIIEntityKeys).mask
}

// maskName keeps initials: "Dana Whitfield" → "D. W.", enough to greet nobody by name.
func maskName(name string) string {
	if name == "" {
		return ""
	}
	var parts []string
	for _, word := range strings.Fields(name) {
		parts = append(parts, initial(word))
	}
	return strings.Join(parts, " ")
}

func initial(word string) string {
	r, _ := utf8.DecodeRuneInString(word)
	return string(r) + "."
}

// maskEmail keeps the domain, which tells an agent which company without naming the person.
func maskEmail(email string) string {
	if email == "" {
		return ""
	}
	if at := strings.LastIndex(email, "@"); at > 0 {
		return Masked + email[at:]
	}
	return Masked
}

// maskPhone keeps the last two digits, enough to confirm with a caller who reads them out. No
// phone stays no phone: a mask there would show a number that does not exist.
func maskPhone(phone string) string {
	if strings.TrimSpace(phone) == "" {
		return ""
	}
	digits := digitsOf(phone)
	if len(digits) < 4 {
		return Masked
	}
	return Masked + digits[len(digits)-2:]
}

func digitsOf(s string) string {
	return strings.Map(func(r rune) rune {
		if r >= '0' && r <= '9' {
			return r
		}
		return -1
	}, s)
}

// mentions are the ways free text can name one contact, each with what it is masked as. The
// zero mentions masks nothing.
type mentions struct {
	// emails are the email address, as written and percent-encoded (as in a mailto: link), matched
	// regardless of case wherever they stand: no word of text ends or starts inside an address,
	// and one glued to a word still names the customer.
	emails []mention
	// words are the name's words (and values of PII entities), matched whole and regardless of
	// case, longest first.
	words []mention
	// phone is the phone number's digits; phoneMasked replaces it.
	phone, phoneMasked string
}

type mention struct{ text, masked string }

// minPhoneSuffix is how many of the phone number's last digits a mention must give when it
// leaves the start out: a local number without its country and area codes still names the
// customer, a short run of digits that happens to end the same way does not.
const minPhoneSuffix = 7

// mentionsOf lists how text can mention c. A mention stands on word boundaries: "Dan" is not
// masked inside "Danish", which would garble words that merely start like a name, while
// "Dana's" and "dana," are masked. Matching ignores case, as people and bots write names and
// addresses in any case; the price is that a name that is also a word ("Will", "Bill") is
// masked where the word is meant, which the bot avoids by redacting its text itself and
// setting FlagPIIRedacted. Each word of the name of two letters or more counts alone (a first
// name alone greets the customer just as well) and is masked to its initial; single letters are
// initials already, and a word without a letter ("Agent 47") is no name: masking it would
// garble amounts and dates. A phone number counts in any formatting, its digits compared without
// separators, whole or by its last minPhoneSuffix digits or more.
func mentionsOf(c Contact) mentions {
	var m mentions
	if c.Email != "" {
		m.addEmail(c.Email, maskEmail(c.Email))
	}
	for _, word := range nameWords(c.DisplayName) {
		m.words = append(m.words, mention{word, initial(word)})
	}
	slices.SortStableFunc(m.words, func(a, b mention) int { return len(b.text) - len(a.text) })
	if digits := digitsOf(c.Phone); len(digits) >= 4 {
		m.phone, m.phoneMasked = digits, maskPhone(c.Phone)
	}
	return m
}

// nameWords are the words of a name that count as mentions of it.
func nameWords(name string) []string {
	var words []string
	for _, word := range strings.FieldsFunc(name, func(r rune) bool { return !isNameRune(r) }) {
		if utf8.RuneCountInString(word) >= 2 && strings.ContainsFunc(word, unicode.IsLetter) {
			words = append(words, word)
		}
	}
	return words
}

func (m mentions) none() bool { return len(m.emails) == 0 && len(m.words) == 0 && m.phone == "" }

// addEmail adds an email address that masked replaces, in both of its spellings.
func (m *mentions) addEmail(email, masked string) {
	m.emails = append(m.emails, mention{email, masked})
	if encoded := strings.ReplaceAll(email, "@", "%40"); encoded != email {
		m.emails = append(m.emails, mention{encoded, masked})
	}
}

// mask replaces every mention in text with what masks it.
func (m mentions) mask(text string) string {
	return m.replace(text, func(_ string, w mention) string { return w.masked })
}

// replace replaces every mention in text with what with returns for it: the text as written
// there, and the mention it matched (a phone number as its digits and phoneMasked).
func (m mentions) replace(text string, with func(surface string, w mention) string) string {
	if m.none() || text == "" {
		return text
	}
	starts := m.firstBytes()
	var out strings.Builder
	last := 0        // text[:last] is in out
	prev := rune(-1) // the rune before text[i], -1 at the start
	for i := 0; i < len(text); {
		if !starts[text[i]] {
			// No mention starts with this byte: most of any text, passed over without a lookup.
			r, size := utf8.DecodeRuneInString(text[i:])
			i += size
			prev = r
			continue
		}
		if end, w := m.at(text, i, prev); end >= 0 {
			masked := with(text[i:end], w)
			// "Thanks, Dana." becomes "Thanks, D." rather than "D..".
			if strings.HasSuffix(masked, ".") && strings.HasPrefix(text[end:], ".") {
				masked = masked[:len(masked)-1]
			}
			out.WriteString(text[last:i])
			out.WriteString(masked)
			// A mention ends a word: what follows it may be the next mention ("0191Whitfield").
			i, last, prev = end, end, -1
			continue
		}
		r, size := utf8.DecodeRuneInString(text[i:])
		i += size
		prev = r
	}
	if last == 0 {
		return text
	}
	out.WriteString(text[last:])
	return out.String()
}

// at reports the end of the mention that starts at text[i], after the rune prev, and which it
// is; or -1. Names and entities stand as whole words; a phone number is not part of a longer
// run of digits, whatever letters stand around it; an email stands anywhere.
func (m mentions) at(text string, i int, prev rune) (end int, w mention) {
	if n, w := m.emailAt(text[i:]); n > 0 {
		return i + n, w
	}
	r, _ := utf8.DecodeRuneInString(text[i:])
	if prev < 0 || !isWordRune(prev) || !isWordRune(r) {
		for _, w := range m.words {
			if n := prefixFold(text[i:], w.text); n > 0 && m.ends(text, i+n) {
				return i + n, w
			}
		}
	}
	if m.phone != "" && !isDigit(prev) {
		if n := m.phoneAt(text[i:]); n > 0 && (i+n == len(text) || !isDigit(rune(text[i+n])) || m.ends(text, i+n)) {
			return i + n, mention{m.phone, m.phoneMasked}
		}
	}
	return -1, mention{}
}

// firstBytes marks the bytes a mention may start with: the first letter of each in either case,
// a phone number's digits and its leading "+" or "(", and every byte outside ASCII, where case
// folding reaches further ("K" for the Kelvin sign) than a table of bytes would tell.
func (m mentions) firstBytes() *[256]bool {
	var t [256]bool
	for b := utf8.RuneSelf; b < 256; b++ {
		t[b] = true
	}
	for _, ws := range [][]mention{m.emails, m.words} {
		for _, w := range ws {
			c := w.text[0]
			t[c] = true
			if l := c | 0x20; 'a' <= l && l <= 'z' {
				t[l], t[l&^0x20] = true, true
			}
		}
	}
	if m.phone != "" {
		for _, c := range []byte("0123456789+(") {
			t[c] = true
		}
	}
	return &t
}

// emailAt returns the length of the email mention at the start of s, and which; or 0.
func (m mentions) emailAt(s string) (int, mention) {
	for _, w := range m.emails {
		if n := prefixFold(s, w.text); n > 0 {
			return n, w
		}
	}
	return 0, mention{}
}

// ends reports whether a mention may end at text[end]: where a word ends, or where another
// mention begins, glued on ("DANA415-555-0191"), which masking would otherwise leave bare. The
// one glued on is only begun, not sought to its end, so this looks ahead once, never again
// from there.
func (m mentions) ends(text string, end int) bool {
	if wordEnds(text, end) {
		return true
	}
	rest := text[end:]
	if n, _ := m.emailAt(rest); n > 0 {
		return true
	}
	for _, w := range m.words {
		if prefixFold(rest, w.text) > 0 {
			return true
		}
	}
	return m.phone != "" && m.phoneAt(rest) > 0
}

func isDigit(r rune) bool { return '0' <= r && r <= '9' }

// phoneSeparators may stand between the digits of a phone number as people write it.
const phoneSeparators = " -./()"

// phoneAt returns the length of the longest mention of the phone number at the start of s: an
// optional "+" or "(", then digits in groups with up to three separators between groups.
func (m mentions) phoneAt(s string) int {
	i := 0
	if i < len(s) && (s[i] == '+' || s[i] == '(') {
		i++
	}
	var digits []byte
	longest := 0
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			digits = append(digits, s[i])
			i++
		}
		if d := string(digits); d == m.phone || len(d) >= minPhoneSuffix && strings.HasSuffix(m.phone, d) {
			longest = i
		}
		if len(digits) >= len(m.phone) {
			break
		}
		gap := 0
		for gap < 3 && i+gap < len(s) && strings.IndexByte(phoneSeparators, s[i+gap]) >= 0 {
			gap++
		}
		i += gap
	}
	return longest
}

// maskAll masks each of texts, in a new slice.
func (m mentions) maskAll(texts []string) []string {
	if m.none() || texts == nil {
		return texts
	}
	out := make([]string, len(texts))
	for i, t := range texts {
		out[i] = m.mask(t)
	}
	return out
}

// maskEntity masks mentions in an entity's text, list items, or number (a phone number sent
// as one); a masked number becomes text.
func (m mentions) maskEntity(v EntityValue) EntityValue {
	switch v.kind {
	case EntityString:
		return StringEntity(m.mask(v.text))
	case EntityNumber:
		if masked := m.mask(v.text); masked != v.text {
			return StringEntity(masked)
		}
	case EntityList:
		return EntityValue{kind: EntityList, list: m.maskAll(v.list)}
	}
	return v
}

// isNameRune reports whether r can be part of a word of a name.
func isNameRune(r rune) bool {
	if r < utf8.RuneSelf {
		return 'a' <= r|0x20 && r|0x20 <= 'z' || '0' <= r && r <= '9'
	}
	return unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.IsMark(r)
}

// isWordRune reports whether r joins the word next to it: a mention may not start or end next
// to one. Scripts written without spaces between words have no boundaries to find: there the
// name counts wherever it stands ("王小明的账户").
func isWordRune(r rune) bool {
	return isNameRune(r) && (r < utf8.RuneSelf || !unicode.In(r, unspacedScripts...))
}

var unspacedScripts = []*unicode.RangeTable{unicode.Han, unicode.Hiragana, unicode.Katakana, unicode.Thai,
	unicode.Lao, unicode.Khmer, unicode.Myanmar}

// wordEnds reports whether a word ends at text[end].
func wordEnds(text string, end int) bool {
	r, _ := utf8.DecodeRuneInString(text[end:])
	return end == len(text) || !isWordRune(r)
}

// prefixFold returns the length in s of prefix at the start of s, its letters in any case
// (Unicode simple folding, as strings.EqualFold), or 0.
func prefixFold(s, prefix string) int {
	i := 0
	for _, want := range prefix {
		if i >= len(s) {
			return 0
		}
		got, size := utf8.DecodeRuneInString(s[i:])
		if !equalFold(got, want) {
			return 0
		}
		i += size
	}
	return i
}

func equalFold(a, b rune) bool {
	if a == b {
		return true
	}
	if a < utf8.RuneSelf && b < utf8.RuneSelf { // most text, without a walk through Unicode's tables
		a, b = a|0x20, b|0x20
		return a == b && 'a' <= a && a <= 'z'
	}
	for r := unicode.SimpleFold(a); r != a; r = unicode.SimpleFold(r) {
		if r == b {
			return true
		}
	}
	return false
}
