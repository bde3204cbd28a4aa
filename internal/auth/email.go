package auth

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/cases"
	"golang.org/x/text/unicode/norm"

	"github.com/handoffdesk/desk/internal/desk"
)

// NormalizeEmail is the one form in which the desk stores, looks up and compares an email address,
// whichever way it arrives: the login form, single sign-on, the admin console, the command line, a
// bot's preferred agent. The database compares what it returns byte for byte, never through
// lower(), whose folding depends on the database's collation: there "admİn" (U+0130) and
// "\u212Aate" (the Kelvin sign) fold to "admin" and "kate", which let a look-alike address sign in
// as another person.
//
// The rule, in order:
//
//  1. Surrounding white space is trimmed. An address holding an invisible character (a control or
//     format character such as U+200B or U+00AD, an unassigned code point, any space) is refused.
//  2. A non-ASCII character is refused when any of its mappings holds an ASCII character: its
//     lower, upper and title case, the other members of its case-folding orbit, its full case
//     folding and its compatibility (NFKC) form. Each such character can pass for, or be folded
//     into, plain letters by some comparison on the way (a database's lower(), a mail system's
//     case folding, a font): İ U+0130 (lower case i), ı U+0131 (upper case I), the Kelvin sign
//     U+212A (k), ſ U+017F (s), ß and ẞ (ss), ligatures such as ﬁ, fullwidth forms such as ａ and
//     ＠, superscripts and circled letters. Unicode TR36 §2 and the confusables of TR39 describe
//     the attack; PRECIS (RFC 8264 §9.17) disallows compatibility characters in identifiers for
//     the same reason.
//  3. The address is put in Unicode Normalization Form C (RFC 6531 §3.1 and RFC 6532 §3.1 ask
//     for NFC in internationalised addresses), so that an é typed as e + U+0301 is the é stored.
//  4. A combining mark still sitting on an ASCII character after NFC (i + U+0307 has no
//     precomposed form) is refused: it reads as the plain letter.
//  5. A part of the address (the local part and each domain label, split at "@" and ".") that
//     holds a Latin letter may hold no letter of another script but Han, Hiragana, Katakana,
//     Bopomofo and Hangul, TR39 §5.2's "highly restrictive" level: "аdmin" with a Cyrillic а is
//     refused. A part in one other script ("почта") is an address of its own and passes.
//  6. ASCII letters are lower-cased, in the local part too: RFC 5321 §2.4 lets a server tell
//     "Dana" from "dana", but no mail system people use does, and the desk has always treated
//     them as one login. No other letter is folded: "Ünal" and "ünal" stay two addresses, as RFC
//     5321 allows, rather than be folded by rules that differ between Unicode versions and
//     databases.
//
// What is refused is an Invalid error naming the character and why. An address is at most
// MaxEmailLen characters. Whether the rest is an address (an "@", a domain) is for its caller to
// check: a lookup of a malformed one finds nobody.
func NormalizeEmail(email string) (string, error) {
	email = strings.TrimSpace(email)
	if n := utf8.RuneCountInString(email); n > MaxEmailLen {
		return "", emailRefused("the email is %d characters; no address is over %d", n, MaxEmailLen)
	}
	if !utf8.ValidString(email) {
		return "", emailRefused("the email is not valid UTF-8")
	}
	for _, r := range email {
		if r < utf8.RuneSelf && r > ' ' && r != 0x7f {
			continue
		}
		if !unicode.IsGraphic(r) || unicode.IsSpace(r) {
			return "", emailRefused("the email %q holds an invisible or space character (%U)", email, r)
		}
		if ascii, ok := mapsOntoASCII(r); ok {
			return "", emailRefused("the email %q holds %c (%U), which can be read or folded as %q: it could pass for another address; type it in plain letters",
				email, r, r, ascii)
		}
	}
	email = norm.NFC.String(email)
	var prev rune
	for _, r := range email {
		if prev != 0 && prev < utf8.RuneSelf && unicode.In(r, unicode.Mn, unicode.Me) {
			return "", emailRefused("the email %q puts a combining mark (%U) on %q, which reads as the plain letter", email, r, prev)
		}
		prev = r
	}
	for part := range strings.FieldsFuncSeq(email, func(r rune) bool { return r == '@' || r == '.' }) {
		if other, script := mixedWithLatin(part); other != 0 {
			return "", emailRefused("the email %q mixes Latin letters with %c (%U, %s) in %q: it could pass for another address",
				email, other, other, script, part)
		}
	}
	return strings.Map(func(r rune) rune {
		if 'A' <= r && r <= 'Z' {
			return r + ('a' - 'A')
		}
		return r
	}, email), nil
}

func emailRefused(format string, args ...any) error {
	msg := fmt.Sprintf(format, args...)
	return &desk.Error{Code: desk.Invalid, Message: msg, Details: map[string]string{"email": msg}}
}

var fold = cases.Fold()

// mapsOntoASCII reports whether a non-ASCII character has a case mapping, a case folding or a
// compatibility form that holds an ASCII character, and returns that form.
func mapsOntoASCII(r rune) (string, bool) {
	forms := []string{string(unicode.ToLower(r)), string(unicode.ToUpper(r)), string(unicode.ToTitle(r)),
		fold.String(string(r)), norm.NFKC.String(string(r)), fold.String(norm.NFKC.String(string(r)))}
	for o := unicode.SimpleFold(r); o != r; o = unicode.SimpleFold(o) {
		forms = append(forms, string(o))
	}
	for _, f := range forms {
		f = norm.NFC.String(f)
		if strings.ContainsFunc(f, func(c rune) bool { return c < utf8.RuneSelf }) {
			return f, true
		}
	}
	return "", false
}

// The scripts TR39's highly restrictive level lets Latin share an identifier with.
var withLatin = []*unicode.RangeTable{unicode.Latin, unicode.Han, unicode.Hiragana, unicode.Katakana, unicode.Bopomofo, unicode.Hangul}

// mixedWithLatin returns the first letter of part that is of a script Latin may not share a part
// with, and that script's name, when part holds a Latin letter.
func mixedWithLatin(part string) (rune, string) {
	var other rune
	latin := false
	for _, r := range part {
		switch {
		case !unicode.IsLetter(r):
		case unicode.Is(unicode.Latin, r):
			latin = true
		case other == 0 && !unicode.In(r, withLatin...):
			other = r
		}
	}
	if !latin || other == 0 {
		return 0, ""
	}
	for name, table := range unicode.Scripts {
		if unicode.Is(table, other) {
			return other, name
		}
	}
	return other, "another script"
}
