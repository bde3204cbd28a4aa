package handoff

import (
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"
)

// Redaction replaces what names one package's customer with placeholders that say what was there
// and nothing of it: <NAME_1>, <EMAIL_1>, <PHONE_1>, and for a value of a PII entity key the key's
// name, as <ACCOUNT_ID_1>. Each distinct value keeps its placeholder wherever it occurs, so that
// text redacted apart (a prompt and its completion) still says the same person. The zero
// Redaction replaces nothing.
type Redaction struct{ m mentions }

// RedactFor returns a copy of p with its contact, its PII entities and their every mention in its
// free text (transcript included) replaced by placeholders, and the Redaction that does the same
// to other text about p: replies and notes.
//
// It finds mentions as MaskFor does (see mentionsOf), and the entities' values the same way,
// whole and in any case, but it ignores FlagPIIRedacted: redacted data is meant to leave the
// company, where a bot's word is not enough. A transcript the queue withholds from v is dropped
// here too: a placeholder stands in for a value, not for a conversation v may not read.
func (p Package) RedactFor(v Visibility) (Package, Redaction) {
	r := Redaction{m: placeholdersOf(p, v.PIIEntityKeys)}
	c := p.Contact
	p.Contact = Contact{ID: c.ID, DisplayName: r.Text(c.DisplayName), Email: r.Text(c.Email), Phone: r.Text(c.Phone)}
	r.m.maskFreeText(&p)
	if len(p.StructuredEntities) > 0 {
		entities := make(map[string]EntityValue, len(p.StructuredEntities))
		for k, val := range p.StructuredEntities {
			entities[k] = r.m.maskEntity(val)
		}
		p.StructuredEntities = entities
	}
	if v.WithholdTranscript {
		p.Transcript = nil
	} else if len(p.Transcript) > 0 {
		turns := make([]Turn, len(p.Transcript))
		for i, t := range p.Transcript {
			t.Content = r.Text(t.Content)
			turns[i] = t
		}
		p.Transcript = turns
	}
	return p, r
}

// Text replaces every mention in text.
func (r Redaction) Text(text string) string { return r.m.mask(text) }

// minEntityRunes is the shortest PII entity value sought in free text: a single character would
// replace every digit or letter like it.
const minEntityRunes = 2

// placeholdersOf lists the mentions of p's customer with their placeholders, numbered per kind in
// the order the contact's fields and then the entities (by key) give them.
func placeholdersOf(p Package, piiKeys []string) mentions {
	var m mentions
	seen := map[string]bool{}
	count := map[string]int{}
	add := func(kind, text string) {
		folded := strings.ToLower(text)
		if utf8.RuneCountInString(text) < minEntityRunes || seen[folded] {
			return
		}
		seen[folded] = true
		count[kind]++
		m.words = append(m.words, mention{text, fmt.Sprintf("<%s_%d>", kind, count[kind])})
	}
	c := p.Contact
	if c.Email != "" {
		seen[strings.ToLower(c.Email)] = true
		m.addEmail(c.Email, "<EMAIL_1>")
	}
	for _, word := range nameWords(c.DisplayName) {
		add("NAME", word)
	}
	for _, k := range presentKeys(p, piiKeys) {
		kind := placeholderKind(k)
		for _, text := range entityTexts(p.StructuredEntities[k]) {
			add(kind, text)
		}
	}
	slices.SortStableFunc(m.words, func(a, b mention) int { return len(b.text) - len(a.text) })
	if digits := digitsOf(c.Phone); len(digits) >= 4 {
		m.phone, m.phoneMasked = digits, "<PHONE_1>"
	}
	return m
}

// presentKeys are those of keys p has an entity for, once each, in order: what numbers
// placeholders and tokens alike.
func presentKeys(p Package, keys []string) []string {
	var present []string
	for _, k := range keys {
		if _, ok := p.StructuredEntities[k]; ok && !slices.Contains(present, k) {
			present = append(present, k)
		}
	}
	slices.Sort(present)
	return present
}

// placeholderKind turns an entity key into a placeholder's kind: "account_id" → "ACCOUNT_ID".
func placeholderKind(key string) string {
	kind := strings.Map(func(r rune) rune {
		switch {
		case 'a' <= r && r <= 'z':
			return r - 'a' + 'A'
		case 'A' <= r && r <= 'Z', '0' <= r && r <= '9':
			return r
		}
		return '_'
	}, key)
	if kind == "" {
		return "ENTITY"
	}
	return kind
}
