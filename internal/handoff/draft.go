package handoff

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/handoffdesk/desk/internal/desk"
)

// The brackets of a token. Nobody types them by accident, and a token with both in place and
// a known label between them is intact: anything else holding one of them is damaged.
const (
	TokenOpen  = "⟦"
	TokenClose = "⟧"
)

// Draft is the bot's draft reply as one agent edits it: where their role may not see a value the
// draft names (the contact's name, email or phone, a PII entity), the text holds a token saying
// what stands there, ⟦first name⟧ or ⟦account_id⟧, and nothing of the value itself.
//
// Fill turns the agent's text back into what the customer gets: each intact token becomes its
// value, exactly as the draft wrote it, and every other character goes out as typed. Nothing is
// carried over by guessing where an edit belongs, so an edit beside a hidden value can neither
// corrupt it nor leak a piece of it; a token the agent damaged is refused, never repaired.
//
// A Draft is a pure function of the package and the viewer's Visibility, so the server builds the
// same one again when the reply comes back, and the values never travel through the browser.
type Draft struct {
	// Text is the draft with tokens, for the editor; the draft itself when nothing is hidden.
	Text   string
	tokens []token
}

type token struct{ label, value string }

func tokenText(label string) string { return TokenOpen + label + TokenClose }

// Labels are the tokens the agent may use, in the order the contact's fields and the entities
// give them: those of the draft, and those for values the draft never names, so that a reply
// written from scratch can greet the customer by name too.
func (d Draft) Labels() []string {
	labels := make([]string, len(d.tokens))
	for i, t := range d.tokens {
		labels[i] = t.label
	}
	return labels
}

// Tokens returns each label as the agent sees it in the text, ⟦label⟧.
func (d Draft) Tokens() []string {
	out := d.Labels()
	for i, l := range out {
		out[i] = tokenText(l)
	}
	return out
}

// freeLabel is base numbered past the labels d has: "first name 2".
func (d Draft) freeLabel(base string) string {
	for n := 2; ; n++ {
		label := fmt.Sprintf("%s %d", base, n)
		if _, taken := d.value(label); !taken {
			return label
		}
	}
}

func (d Draft) value(label string) (string, bool) {
	for _, t := range d.tokens {
		if t.label == label {
			return t.value, true
		}
	}
	return "", false
}

// DraftFor is p's draft reply as an editor for v. When v sees PII the draft is the bot's text
// and there are no tokens. Otherwise each mention of a hidden value becomes a token, as MaskFor
// masks it (see mentionsOf), and the contact's full name counts as one mention before its words.
// A bot that vouched its text names nobody (FlagPIIRedacted) gets its draft shown as written, as
// MaskFor shows it; its tokens are still there to insert.
//
// A mention written otherwise than the contact's field ("DANA" for "Dana", the phone with other
// separators) gets a token of its own, ⟦first name 2⟧, so that a draft sent untouched goes out
// exactly as the bot wrote it.
func (p Package) DraftFor(v Visibility) Draft {
	if v.PII {
		return Draft{Text: p.DraftReply}
	}
	m, tokens := labelledMentionsOf(p, v.PIIEntityKeys)
	d := Draft{tokens: tokens}
	if p.PrivacyFlags[FlagPIIRedacted] {
		d.Text = p.DraftReply
		return d
	}
	d.Text = m.replace(p.DraftReply, func(surface string, w mention) string {
		for _, t := range d.tokens {
			if t.value == surface {
				return tokenText(t.label)
			}
		}
		label := d.freeLabel(w.masked)
		d.tokens = append(d.tokens, token{label, surface})
		return tokenText(label)
	})
	return d
}

// The labels of the contact's fields; a PII entity's label is its key.
const (
	labelName       = "name"
	labelFirstName  = "first name"
	labelLastName   = "last name"
	labelMiddleName = "middle name"
	labelEmail      = "email"
	labelPhone      = "phone"
)

// labelledMentionsOf is piiMentionsOf with a token's label where the mask would go, and the full
// name as a mention of its own; and the tokens for the values, in the order of the contact's
// fields and then the entities by key.
func labelledMentionsOf(p Package, keys []string) (mentions, []token) {
	var m mentions
	var tokens []token
	seen := map[string]bool{}
	count := map[string]int{}
	label := func(base string) string {
		base = strings.NewReplacer(TokenOpen, "(", TokenClose, ")").Replace(base)
		if count[base]++; count[base] > 1 {
			return fmt.Sprintf("%s %d", base, count[base])
		}
		return base
	}
	add := func(base, text string) {
		if utf8.RuneCountInString(text) < minEntityRunes || seen[text] {
			return
		}
		seen[text] = true
		t := token{label(base), text}
		tokens = append(tokens, t)
		m.words = append(m.words, mention{text, t.label})
	}
	c := p.Contact
	words := nameWords(c.DisplayName)
	if len(words) > 1 {
		add(labelName, strings.Join(strings.Fields(c.DisplayName), " "))
	}
	for i, w := range words {
		switch {
		case len(words) == 1:
			add(labelName, w)
		case i == 0:
			add(labelFirstName, w)
		case i == len(words)-1:
			add(labelLastName, w)
		default:
			add(labelMiddleName, w)
		}
	}
	if c.Email != "" {
		seen[c.Email] = true
		tokens = append(tokens, token{label(labelEmail), c.Email})
		m.addEmail(c.Email, tokens[len(tokens)-1].label)
	}
	if digits := digitsOf(c.Phone); len(digits) >= 4 {
		tokens = append(tokens, token{label(labelPhone), c.Phone})
		m.phone, m.phoneMasked = digits, tokens[len(tokens)-1].label
	}
	for _, k := range presentKeys(p, keys) {
		for _, text := range entityTexts(p.StructuredEntities[k]) {
			add(k, text)
		}
	}
	slices.SortStableFunc(m.words, func(a, b mention) int { return len(b.text) - len(a.text) })
	return m, tokens
}

// entityTexts are the texts by which free text can name an entity's value.
func entityTexts(val EntityValue) []string {
	switch val.Kind() {
	case EntityList:
		return val.List()
	case EntityString:
		return []string{val.Text()}
	case EntityNumber:
		return []string{string(val.Number())}
	case EntityBool:
		// true or false names nobody.
	}
	return nil
}

// Fill is the reply the customer gets for text, the agent's edit of d.Text: each intact token
// replaced by its value, everything else exactly as typed. It refuses, naming the fragment, a
// token the agent damaged (a bracket without its pair, a label d does not have) and a mask
// glyph pasted from the page, which would reach the customer as bullets.
func (d Draft) Fill(text string) (string, error) {
	var out strings.Builder
	rest := text
	for rest != "" {
		open, closing := strings.Index(rest, TokenOpen), strings.Index(rest, TokenClose)
		if open < 0 && closing < 0 {
			out.WriteString(rest)
			break
		}
		if closing >= 0 && (open < 0 || closing < open) {
			return "", d.damaged(fragmentBefore(rest, closing+len(TokenClose)))
		}
		out.WriteString(rest[:open])
		rest = rest[open:]
		end := strings.Index(rest[len(TokenOpen):], TokenClose)
		next := strings.Index(rest[len(TokenOpen):], TokenOpen)
		if end < 0 || next >= 0 && next < end {
			return "", d.damaged(fragmentAfter(rest))
		}
		end += len(TokenOpen)
		value, ok := d.value(rest[len(TokenOpen):end])
		if !ok {
			return "", d.damaged(rest[:end+len(TokenClose)])
		}
		out.WriteString(value)
		rest = rest[end+len(TokenClose):]
	}
	if strings.Contains(text, Masked) {
		return "", replyError("mask", Masked, fmt.Sprintf("the reply contains %s, which stands for a value you may not see and would reach the customer as it is: "+
			"use a token (%s) or write the text out", Masked, d.tokenList()))
	}
	return out.String(), nil
}

// fragmentLimit bounds how much of a damaged token an error quotes: enough to find it.
const fragmentLimit = 24

func fragmentBefore(s string, end int) string {
	start := end
	for n := 0; start > 0 && n < fragmentLimit; n++ {
		_, size := utf8.DecodeLastRuneInString(s[:start])
		start -= size
	}
	return s[start:end]
}

func fragmentAfter(s string) string {
	end := 0
	for n := 0; end < len(s) && n < fragmentLimit; n++ {
		r, size := utf8.DecodeRuneInString(s[end:])
		if n > 0 && (string(r) == TokenOpen || r == '\n') {
			break
		}
		end += size
	}
	return s[:end]
}

func (d Draft) tokenList() string {
	if len(d.tokens) == 0 {
		return "this package has none"
	}
	return strings.Join(d.Tokens(), ", ")
}

func (d Draft) damaged(fragment string) error {
	return replyError("token", fragment, fmt.Sprintf("%q is a damaged token: a token stands for a hidden value and is kept whole or deleted whole. "+
		"Put it back as it was, or delete it (this package's tokens: %s)", fragment, d.tokenList()))
}

func replyError(problem, fragment, message string) error {
	return &desk.Error{Code: desk.Invalid, Reason: "reply_" + problem, Message: message,
		Details: map[string]string{"field": "text", problem: fragment}}
}

// ReplyFor is a reply sent on p as v reads it: the same tokens the editor showed where v may not
// see a value, so an agent reads back what they sent as they wrote it. The bot's flag does not
// apply: an agent's reply may name the customer whatever the bot vouched for its own text.
func (p Package) ReplyFor(v Visibility, text string) string {
	p.DraftReply, p.PrivacyFlags = text, nil
	return p.DraftFor(v).Text
}

// TemplateFor is a saved reply's text, written with the editor's tokens, as v's editor takes it
// for p: a token stands where v may not see the value, as in the draft, and becomes the value
// itself where v may. A token p has no value for stays as written: the send names it, for the
// agent to fill in or delete.
func (p Package) TemplateFor(v Visibility, text string) string {
	keys := slices.Sorted(maps.Keys(p.StructuredEntities))
	_, tokens := labelledMentionsOf(p, keys)
	var pairs []string
	for _, t := range tokens {
		hidden := !v.PII && (!slices.Contains(keys, t.label) || slices.Contains(v.PIIEntityKeys, t.label))
		if !hidden {
			pairs = append(pairs, tokenText(t.label), t.value)
		}
	}
	return strings.NewReplacer(pairs...).Replace(text)
}
