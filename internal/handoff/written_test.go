package handoff

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/handoffdesk/desk/internal/auth"
)

// A guess at the contact typed by someone who cannot see it reads alike, right or wrong, to every
// reader: to its writer and to another agent below the queue's PII role, a right name, email,
// phone or account value reads as a wrong one does, as written. A text by someone who saw the
// contact is masked by value.
func TestWrittenMaskConfirmsNoGuess(t *testing.T) {
	p := harborPackage(t) // Dana Whitfield, dana.whitfield@example.com, +1-415-555-0134, acct_9912
	rule := PIIRule{MinRole: "supervisor", EntityKeys: []string{"account_id"}}
	agent := VisibilityFor(auth.RoleAgent, rule)
	mask := p.WrittenMaskFor(agent)
	// The same package about somebody else: what a text reads as must not depend on whom it is about.
	other := p
	other.Contact = Contact{ID: "c2", DisplayName: "Bartholomew Holm", Email: "bart.holm@example.com", Phone: "+1-415-555-0734"}
	other.StructuredEntities = map[string]EntityValue{"account_id": StringEntity("acct_1234")}
	otherMask := other.WrittenMaskFor(agent)
	own, blind := Writer{Viewer: true}, Writer{}
	for _, text := range []string{
		"guess: Whitfield, dana.whitfield@example.com, +1-415-555-0134, acct_9912",
		"guess: Bartholomew, bart.holm@example.com, +1-415-555-0734, acct_1234",
		"Is this Dana Whitfield? Her account is acct_9912",
		"Is this Bartholomew Holm? His account is acct_1234",
		"mail dana.whitfield@example.com or call 415 555 0134",
	} {
		for _, by := range []Writer{own, blind} {
			if a, b := mask(text, by), otherMask(text, by); a != text || b != text {
				t.Errorf("%+v: %q reads %q about Dana, %q about Bartholomew: want it as written, a guess is confirmed", by, text, a, b)
			}
		}
	}
	saw := Writer{SawContact: true}
	if got, want := mask("Call Dana Whitfield at +1 (415) 555-0134 or dana.whitfield@example.com, acct_9912", saw),
		"Call D. W. at •••34 or •••@example.com, •••"; got != want {
		t.Errorf("a supervisor's note reads %q, want %q", got, want)
	}
	if got, want := mask("Call Dana Whitfield", Writer{SawContact: true, Viewer: true}), "Call Dana Whitfield"; got != want {
		t.Errorf("its writer reads their note %q, want %q", got, want)
	}
	if sup := p.WrittenMaskFor(VisibilityFor(auth.RoleSupervisor, rule)); sup("Call Dana Whitfield, acct_9912", saw) != "Call Dana Whitfield, acct_9912" {
		t.Error("a viewer who sees the contact reads a note as written")
	}
}

// A bot's name and the contact's name refuse characters that show nothing or reorder the page
// (rule visible_text); letters of any script, and spaces, pass.
func TestNamesAreVisibleText(t *testing.T) {
	for _, c := range []struct {
		source, name string
		bad          []string
	}{
		{"tier1-support", "Dana Whitfield", nil},
		{"бот-поддержки", "دانا ويتفيلد", nil},
		{"tier1\u202esupport", "Dana", []string{"source_agent"}},
		{"tier1", "Dana\u200bWhitfield", []string{"contact.display_name"}},
		{"tier1\u2066x\u2069", "Dana\u202eeno", []string{"contact.display_name", "source_agent"}},
		{"tier1", "Dana\nWhitfield", []string{"contact.display_name"}},
		{"tier1\u00ad", "\ufeffDana", []string{"contact.display_name", "source_agent"}},
	} {
		p := harborPackage(t)
		p.SourceAgent, p.Contact.DisplayName = c.source, c.name
		var bad []string
		if verr, ok := errors.AsType[*ValidationError](p.Validate()); ok {
			for _, f := range verr.Fields {
				if f.Rule != RuleVisibleText || !strings.Contains(f.Message, "invisible") {
					t.Errorf("%q / %q: %+v", c.source, c.name, f)
				}
				bad = append(bad, f.Field)
			}
		}
		if !slices.Equal(bad, c.bad) {
			t.Errorf("%q / %q: refused %v, want %v", c.source, c.name, bad, c.bad)
		}
	}
}

// A contact without a phone or an email shows none masked: no phantom "•••" for a value that
// does not exist.
func TestMaskShowsNoPhantomValue(t *testing.T) {
	p := harborPackage(t)
	p.Contact.Phone, p.Contact.Email = "", ""
	masked := p.MaskFor(VisibilityFor(auth.RoleAgent, PIIRule{MinRole: "supervisor"}))
	if masked.Contact.Phone != "" || masked.Contact.Email != "" {
		t.Errorf("absent phone and email mask to %q and %q, want both empty", masked.Contact.Phone, masked.Contact.Email)
	}
	p.Contact.Phone = " "
	if got := p.MaskFor(VisibilityFor(auth.RoleAgent, PIIRule{MinRole: "supervisor"})).Contact.Phone; got != "" {
		t.Errorf("a blank phone masks to %q", got)
	}
}
