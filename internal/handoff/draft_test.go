package handoff

import (
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/handoffdesk/desk/internal/desk"
)

// dana is the customer of the reply tests: a name of two words, an email, a phone and a PII
// entity, each of which an agent below the queue's PII role may not see.
func dana(draft string) Package {
	return Package{
		Contact:            Contact{ID: "c-1", DisplayName: "Dana Whitfield", Email: "dana.whitfield@example.com", Phone: "+1 415 555 0191"},
		StructuredEntities: map[string]EntityValue{"account_id": StringEntity("AC-88121"), "plan": StringEntity("pro")},
		DraftReply:         draft,
	}
}

var masked = Visibility{PIIEntityKeys: []string{"account_id"}}

const danaDraft = "Hi Dana, I can see the double charge. I have written to dana.whitfield@example.com " +
	"and will call +1 415 555 0191 about account AC-88121 if anything else comes up."

func TestDraftShowsATokenForEachHiddenValue(t *testing.T) {
	d := dana(danaDraft).DraftFor(masked)
	want := "Hi ⟦first name⟧, I can see the double charge. I have written to ⟦email⟧ " +
		"and will call ⟦phone⟧ about account ⟦account_id⟧ if anything else comes up."
	if d.Text != want {
		t.Errorf("the editor shows\n%q\nwant\n%q", d.Text, want)
	}
	if got := strings.Join(d.Labels(), "|"); got != "name|first name|last name|email|phone|account_id" {
		t.Errorf("labels %s", got)
	}
	if open := dana(danaDraft).DraftFor(Visibility{PII: true}); open.Text != danaDraft || len(open.Labels()) != 0 {
		t.Errorf("a viewer who sees PII gets %q with tokens %v, want the draft and none", open.Text, open.Labels())
	}
	vouched := dana(danaDraft)
	vouched.PrivacyFlags = map[string]bool{FlagPIIRedacted: true}
	if d := vouched.DraftFor(masked); d.Text != danaDraft || len(d.Labels()) == 0 {
		t.Errorf("a draft the bot vouched for shows %q with tokens %v, want it as written, tokens to insert", d.Text, d.Labels())
	}
}

// The edits agents make, each with what the customer must get. The first three rows are the
// reports that opened this: go-diff patches put the agent's words in the wrong places.
func TestFillSendsExactlyWhatTheAgentMeant(t *testing.T) {
	d := dana(danaDraft).DraftFor(masked)
	shown := d.Text
	tests := []struct {
		name, text, want string
	}{
		{"sent as is", shown, danaDraft},
		{"full rewrite with the real values typed",
			"Hi Dana, I have refunded the duplicate charge of $49.99. Email dana.whitfield@example.com if anything else.",
			"Hi Dana, I have refunded the duplicate charge of $49.99. Email dana.whitfield@example.com if anything else."},
		{"edit in the middle", strings.Replace(shown, "double charge. I can see", "double charge, I can see", 1),
			strings.Replace(danaDraft, "double charge. I can see", "double charge, I can see", 1)},
		{"typing the real name over the token", strings.Replace(shown, "⟦first name⟧", "Zorblax Quintavius", 1),
			strings.Replace(danaDraft, "Dana", "Zorblax Quintavius", 1)},
		{"edit at the start", strings.Replace(shown, "Hi ", "Hello again ", 1), strings.Replace(danaDraft, "Hi ", "Hello again ", 1)},
		{"edit at the end", shown + " Thanks for waiting.", danaDraft + " Thanks for waiting."},
		{"edit beside a token", strings.Replace(shown, "⟦first name⟧,", "⟦first name⟧!!", 1), strings.Replace(danaDraft, "Dana,", "Dana!!", 1)},
		{"edit beside the phone", strings.Replace(shown, "call ⟦phone⟧ about", "call ⟦phone⟧(mobile) about", 1),
			strings.Replace(danaDraft, "call +1 415 555 0191 about", "call +1 415 555 0191(mobile) about", 1)},
		{"a token deleted", strings.Replace(shown, " I have written to ⟦email⟧ and", "", 1),
			strings.Replace(danaDraft, " I have written to dana.whitfield@example.com and", "", 1)},
		{"a token moved", strings.Replace(strings.Replace(shown, "Hi ⟦first name⟧, I", "I", 1), "comes up.", "comes up, ⟦first name⟧.", 1),
			strings.Replace(strings.Replace(danaDraft, "Hi Dana, I", "I", 1), "comes up.", "comes up, Dana.", 1)},
		{"a token twice, and one the draft never used", "Dear ⟦name⟧ (⟦last name⟧, ⟦last name⟧)", "Dear Dana Whitfield (Whitfield, Whitfield)"},
		{"written from scratch", "We refunded it.", "We refunded it."},
		{"a single bullet of a list", "• refunded\n• credited", "• refunded\n• credited"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := d.Fill(tc.text)
			if err != nil || got != tc.want {
				t.Errorf("Fill(%q)\n= %q, %v\nwant %q", tc.text, got, err, tc.want)
			}
		})
	}
}

func TestFillRefusesADamagedTokenAndNamesIt(t *testing.T) {
	d := dana(danaDraft).DraftFor(masked)
	tests := []struct{ name, text, fragment string }{
		{"a letter deleted", strings.Replace(d.Text, "⟦first name⟧", "⟦first nme⟧", 1), "⟦first nme⟧"},
		{"the closing bracket deleted", strings.Replace(d.Text, "⟦first name⟧", "⟦first name", 1), "⟦first name, I can see t"},
		{"the opening bracket deleted", "Hi first name⟧, again", "Hi first name⟧"},
		{"typed into", strings.Replace(d.Text, "⟦email⟧", "⟦em@ail⟧", 1), "⟦em@ail⟧"},
		{"a label of another package", "Hi ⟦customer⟧", "⟦customer⟧"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := d.Fill(tc.text)
			var e *desk.Error
			if !asDeskError(err, &e) || e.Code != desk.Invalid || e.Details["token"] != tc.fragment || !strings.Contains(e.Message, tc.fragment) {
				t.Fatalf("Fill(%q) = %q, %v; want a refusal naming %q", tc.text, got, err, tc.fragment)
			}
		})
	}
	if _, err := d.Fill("Call the number ending •••91."); desk.ErrorCode(err) != desk.Invalid || !strings.Contains(desk.ErrorMessage(err), Masked) {
		t.Errorf("a mask pasted from the page: %v, want a refusal", err)
	}
}

func asDeskError(err error, target **desk.Error) bool {
	e, ok := err.(*desk.Error)
	*target = e
	return ok
}

// A mention written otherwise than the contact's field gets a token of its own, so that the draft
// sent untouched goes out as the bot wrote it.
func TestVariantsOfAValueKeepTheirSpelling(t *testing.T) {
	draft := "DANA, we called 415-555-0191 and wrote to Dana.Whitfield%40example.com."
	d := dana(draft).DraftFor(masked)
	if d.Text != "⟦first name 2⟧, we called ⟦phone 2⟧ and wrote to ⟦email 2⟧." {
		t.Errorf("the editor shows %q", d.Text)
	}
	if got, err := d.Fill(d.Text); err != nil || got != draft {
		t.Errorf("sent as is: %q, %v; want %q", got, err, draft)
	}
}

// FuzzReplyFill edits a tokenized draft at random. Whatever the agent typed, the bot receives
// the agent's text with each intact token replaced by its value, and nothing else changed; a
// text with a damaged token or a mask is refused, not repaired; the editor never shows a hidden
// value.
func FuzzReplyFill(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3, 4, 5, 6}, "x", uint16(3), uint8(2))
	f.Add([]byte{7, 0, 8, 9, 10, 2}, " ⟦first name⟧ ", uint16(0), uint8(0))
	f.Add([]byte{11, 12, 13}, "•••91", uint16(9), uint8(40))
	f.Add([]byte{1, 1, 14, 15}, "⟦", uint16(4), uint8(1))
	f.Fuzz(func(t *testing.T, pieces []byte, typed string, at uint16, cut uint8) {
		p := dana(draftOf(pieces))
		d := p.DraftFor(masked)
		for _, hidden := range hiddenValues(p) {
			if containsFold(d.Text, hidden) {
				t.Fatalf("the editor shows %q, which names %q", d.Text, hidden)
			}
		}
		m, _ := labelledMentionsOf(p, masked.PIIEntityKeys)
		m.replace(d.Text, func(surface string, _ mention) string {
			t.Fatalf("the editor shows %q, which names %q", d.Text, surface)
			return surface
		})
		if got, err := d.Fill(d.Text); err == nil && got != p.DraftReply {
			t.Fatalf("the draft sent as is became %q, want %q", got, p.DraftReply)
		}
		text := edit(d.Text, typed, int(at), int(cut))
		got, err := d.Fill(text)
		want, intact := fillByHand(d, text)
		switch {
		case intact && !strings.Contains(text, Masked):
			if err != nil || got != want {
				t.Fatalf("Fill(%q) = %q, %v; want %q", text, got, err, want)
			}
			if strings.Contains(got, Masked) {
				t.Fatalf("Fill(%q) sends a mask: %q", text, got)
			}
		case err == nil:
			t.Fatalf("Fill(%q) = %q; want a refusal", text, got)
		case desk.ErrorCode(err) != desk.Invalid:
			t.Fatalf("Fill(%q) failed with %v, want Invalid", text, err)
		}
	})
}

// draftPieces are what fuzzed drafts are made of: the hidden values as bots write them, the
// words around them, and characters that test the edges.
var draftPieces = []string{
	"Hi", "Dana", "Whitfield", "Dana Whitfield", "dana.whitfield@example.com", "+1 415 555 0191", "AC-88121",
	"DANA", "415-555-0191", "dana.whitfield%40example.com", "mailto:", "refund", "$49.99", "pro", "Danaher",
	"⟦", "⟧", "•", "é", "王", "\n",
}

var separators = []string{" ", ", ", "", ". ", "\t", "-"}

// draftOf glues pieces with separators, an empty one included, but never digits to digits: a
// phone number glued to more digits is another number.
func draftOf(pieces []byte) string {
	var b strings.Builder
	for i, c := range pieces {
		piece := draftPieces[int(c)%len(draftPieces)]
		if i > 0 {
			sep := separators[int(c>>5)%len(separators)]
			if sep == "" && endsWithDigit(b.String()) && piece[0] >= '0' && piece[0] <= '9' || strings.HasPrefix(piece, "+") {
				sep = " "
			}
			b.WriteString(sep)
		}
		b.WriteString(piece)
	}
	return b.String()
}

func endsWithDigit(s string) bool { return s != "" && s[len(s)-1] >= '0' && s[len(s)-1] <= '9' }

// hiddenValues are the texts an agent below the PII role must never see in the editor: the
// email in either spelling (an address names its owner wherever it stands) and the phone as
// written anywhere; names and entities are checked as whole words, as mentionsOf defines them.
func hiddenValues(p Package) []string {
	return []string{p.Contact.Email, strings.ReplaceAll(p.Contact.Email, "@", "%40"), p.Contact.Phone, "415-555-0191"}
}

func containsFold(s, sub string) bool {
	return strings.Contains(strings.ToLower(s), strings.ToLower(sub))
}

// edit replaces cut runes at rune position at of text with typed.
func edit(text, typed string, at, cut int) string {
	runes := []rune(text)
	at = at % (len(runes) + 1)
	end := min(len(runes), at+cut%8)
	return string(runes[:at]) + typed + string(runes[end:])
}

var tokenPattern = regexp.MustCompile(`⟦([^⟦⟧]*)⟧`)

// fillByHand is Fill written another way: every intact token replaced by its value, and whether
// no bracket is left outside an intact token.
func fillByHand(d Draft, text string) (string, bool) {
	intact := true
	out := tokenPattern.ReplaceAllStringFunc(text, func(tok string) string {
		label := strings.TrimSuffix(strings.TrimPrefix(tok, TokenOpen), TokenClose)
		if !slices.Contains(d.Labels(), label) {
			intact = false
			return tok
		}
		return "\x00"
	})
	if strings.ContainsAny(out, TokenOpen+TokenClose) {
		intact = false
	}
	var b strings.Builder
	i := 0
	for _, loc := range tokenPattern.FindAllStringSubmatchIndex(text, -1) {
		b.WriteString(text[i:loc[0]])
		if v, ok := d.value(text[loc[2]:loc[3]]); ok {
			b.WriteString(v)
		} else {
			b.WriteString(text[loc[0]:loc[1]])
		}
		i = loc[1]
	}
	b.WriteString(text[i:])
	return b.String(), intact
}

// A saved reply's tokens become the values a viewer may see and stay tokens where they may not; a
// token the package has no value for stays for the send to name. The text a masked agent gets
// from it is one their send fills back in.
func TestTemplateForFillsWhatTheViewerMaySee(t *testing.T) {
	const saved = "Hi ⟦first name⟧, your ⟦plan⟧ plan on ⟦account_id⟧ is refunded; we wrote to ⟦email⟧. ⟦order_id⟧"
	p := dana("")
	if got, want := p.TemplateFor(masked, saved), "Hi ⟦first name⟧, your pro plan on ⟦account_id⟧ is refunded; we wrote to ⟦email⟧. ⟦order_id⟧"; got != want {
		t.Errorf("masked: %q, want %q", got, want)
	}
	if got, want := p.TemplateFor(Visibility{PII: true, PIIEntityKeys: []string{"account_id"}}, saved),
		"Hi Dana, your pro plan on AC-88121 is refunded; we wrote to dana.whitfield@example.com. ⟦order_id⟧"; got != want {
		t.Errorf("a viewer who sees PII: %q, want %q", got, want)
	}
	text := strings.TrimSuffix(p.TemplateFor(masked, saved), " ⟦order_id⟧")
	if sent, err := p.DraftFor(masked).Fill(text); err != nil || sent != "Hi Dana, your pro plan on AC-88121 is refunded; we wrote to dana.whitfield@example.com." {
		t.Errorf("the masked agent's send: %q, %v", sent, err)
	}
}
