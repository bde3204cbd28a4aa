package handoff

import (
	"regexp"
	"strings"
)

// Writer is who wrote a text about a package (a note, a reason, a decision), as masking it for a
// viewer needs to know.
type Writer struct {
	// Viewer: the viewer wrote it. A text is shown to its writer as they wrote it.
	Viewer bool
	// SawContact: the writer saw the package's contact unmasked (their role reaches the queue's
	// PII role), or is a bot, which hands the contact over.
	SawContact bool
}

// WrittenMaskFor masks, for v, texts people wrote about p. A text reads as written for a viewer
// who sees p unmasked, and for its own writer; for the others the contact's values are masked in
// it as in p's own free text (MaskNoteFor), and in a text by someone who could not see the contact
// every email- and phone-shaped token is masked too, whatever it says (maskShapes).
//
// Why: masked for its own writer, a guess typed by someone who cannot see the contact ("is it
// Philomena?") would come back masked when right and as typed when wrong, and confirm it, on the
// page and in search. Masked for others, a name an agent heard on the phone and wrote down stays
// hidden from those below the queue's PII role. What remains: a second person below that role
// reads the first one's right guess of a name masked; emails and phones read alike, right or
// wrong, since their shapes are masked.
func (p Package) WrittenMaskFor(v Visibility) func(text string, by Writer) string {
	if v.PII {
		return func(text string, _ Writer) string { return text }
	}
	values := p.NoteMaskFor(v)
	return func(text string, by Writer) string {
		switch {
		case by.Viewer:
			return text
		case by.SawContact:
			return values(text)
		}
		return maskShapes(values(text))
	}
}

var (
	emailShape = regexp.MustCompile(`[\p{L}\p{N}._%+-]+(@|%40)[\p{L}\p{N}-]+(\.[\p{L}\p{N}-]+)+`)
	// phoneShape is a run of digits as a phone number is written, with an optional "+", spaces,
	// dashes, dots and parentheses; maskShapes reads its digits to tell a phone from a date.
	phoneShape = regexp.MustCompile(`\+?\(?\d[\d ().-]{5,}\d`)
	dateShape  = regexp.MustCompile(`^\d{4}-\d{2}-\d{2}`)
)

// maskShapes masks every email address and phone number in text by its shape, as the contact's
// are masked: "•••@example.org", "•••34".
func maskShapes(text string) string {
	text = emailShape.ReplaceAllStringFunc(text, func(s string) string {
		return maskEmail(strings.Replace(s, "%40", "@", 1))
	})
	return phoneShape.ReplaceAllStringFunc(text, func(s string) string {
		n := len(digitsOf(s))
		// A bare run of digits shorter than a number with its area code is more often an order
		// or an amount than a phone.
		bare := n == len(s)
		if n < minPhoneSuffix || n > 15 || bare && n < 10 || dateShape.MatchString(s) {
			return s
		}
		return maskPhone(s)
	})
}
