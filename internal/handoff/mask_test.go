package handoff

import (
	"slices"
	"strings"
	"testing"

	"github.com/handoffdesk/desk/internal/auth"
)

func TestMaskForHidesPIIBelowTheQueueSetting(t *testing.T) {
	p := harborPackage(t)
	agent := VisibilityFor(auth.RoleAgent, PIIRule{MinRole: "supervisor", EntityKeys: []string{"account_id"}})
	masked := p.MaskFor(agent)
	for _, leak := range []string{"Dana", "Whitfield", "dana.whitfield", "555-0134", "acct_9912"} {
		if strings.Contains(masked.Contact.DisplayName+masked.Contact.Email+masked.Contact.Phone+masked.StructuredEntities["account_id"].Text(), leak) {
			t.Errorf("agent view leaks %q: %+v", leak, masked.Contact)
		}
	}
	if masked.Contact.DisplayName != "D. W." || masked.Contact.Email != "•••@example.com" || masked.Contact.Phone != "•••34" {
		t.Errorf("masked contact %+v", masked.Contact)
	}
	if len(masked.Transcript) != len(p.Transcript) || masked.StructuredEntities["product_sku"].Text() != "PRO-MONTHLY" {
		t.Errorf("the transcript is masked, not withheld, and non-PII entities stay: %v %v", masked.Transcript, masked.StructuredEntities)
	}
	if p.Contact.DisplayName != "Dana Whitfield" || p.StructuredEntities["account_id"].Text() != "acct_9912" {
		t.Error("masking changed the original package")
	}
	supervisor := p.MaskFor(VisibilityFor(auth.RoleSupervisor, PIIRule{MinRole: "supervisor", EntityKeys: []string{"account_id"}}))
	if supervisor.Contact.Email != p.Contact.Email || len(supervisor.Transcript) != len(p.Transcript) {
		t.Error("a supervisor sees PII in a queue whose setting is supervisor")
	}
}

// Below the PII role the transcript stays, with the contact's name, email, phone and the PII
// entities' values masked in every turn, whatever the bot vouched for its own text; a queue that
// withholds it drops it.
func TestMaskForMasksTheTranscriptTurnByTurn(t *testing.T) {
	p := harborPackage(t)
	p.PrivacyFlags = map[string]bool{FlagPIIRedacted: true}
	p.Transcript = append(p.Transcript, Turn{Role: RoleUser,
		Content: "I'm dana whitfield, account ACCT_9912, phone (415) 555-0134, mail Dana.Whitfield@example.com. Please refund."})
	rule := PIIRule{MinRole: "supervisor", EntityKeys: []string{"account_id"}}
	masked := p.MaskFor(VisibilityFor(auth.RoleAgent, rule))
	got := masked.Transcript[len(masked.Transcript)-1].Content
	if want := "I'm D. W., account •••, phone •••34, mail •••@example.com. Please refund."; got != want {
		t.Errorf("masked turn\n got %q\nwant %q", got, want)
	}
	if p.Transcript[len(p.Transcript)-1].Content == got {
		t.Error("masking changed the original transcript")
	}
	rule.WithholdTranscript = true
	if w := p.MaskFor(VisibilityFor(auth.RoleAgent, rule)); w.Transcript != nil {
		t.Errorf("a queue that withholds the transcript still sends %d turns", len(w.Transcript))
	}
	if s := p.MaskFor(VisibilityFor(auth.RoleSupervisor, rule)); len(s.Transcript) != len(p.Transcript) {
		t.Error("withholding reaches roles at or above the PII role")
	}
}

// Unmasked lists what a receiver is shown unmasked, for the record of PII reads.
func TestUnmaskedListsTheFieldsShown(t *testing.T) {
	p := harborPackage(t)
	rule := PIIRule{MinRole: "supervisor", EntityKeys: []string{"account_id", "absent_key"}}
	if got := VisibilityFor(auth.RoleAgent, rule).Unmasked(p); got != nil {
		t.Errorf("an agent is shown nothing unmasked, got %v", got)
	}
	got := VisibilityFor(auth.RoleAdmin, rule).Unmasked(p)
	if want := []string{"name", "email", "phone", "transcript", "entity:account_id"}; !slices.Equal(got, want) {
		t.Errorf("Unmasked = %v, want %v", got, want)
	}
	card := Package{Contact: Contact{DisplayName: p.Contact.DisplayName}}
	if got := VisibilityFor(auth.RoleAdmin, rule).Unmasked(card); !slices.Equal(got, []string{"name"}) {
		t.Errorf("a card showing the name: %v", got)
	}
}

// harborPackage is the spec's example package, decoded.
func harborPackage(t testing.TB) Package {
	t.Helper()
	p, err := Decode(readFile(t, "testdata/harbor-v1.json"))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// The contact's name, email and phone are masked wherever the package's free text mentions
// them, in the forms people and bots write them, and nowhere else.
func TestMaskForMasksTheContactInFreeText(t *testing.T) {
	p := harborPackage(t) // Dana Whitfield, dana.whitfield@example.com, +1-415-555-0134
	agent := VisibilityFor(auth.RoleAgent, PIIRule{MinRole: "supervisor", EntityKeys: nil})
	for _, c := range []struct{ text, want string }{
		{"Hi Dana, I can see two charges.", "Hi D., I can see two charges."},
		{"Ms. Whitfield called twice.", "Ms. W. called twice."},
		{"DANA WHITFIELD and dana whitfield", "D. W. and D. W."},
		{"Dana's card; thanks, Dana.", "D.'s card; thanks, D."},
		{"Danish krone, Danae, Whitfields, Dan", "Danish krone, Danae, Whitfields, Dan"},
		{"Write to Dana.Whitfield@Example.COM today", "Write to •••@example.com today"},
		{"<dana.whitfield@example.com>", "<•••@example.com>"},
		{"call (415) 555 0134, +1 415.555.0134, 14155550134 or 555-0134.", "call •••34, •••34, •••34 or •••34."},
		{"order 12 555-0134", "order 12 •••34"},
		{"ref 0134, 4155 and 15550134", "ref 0134, 4155 and 15550134"},
		// Letters do not extend a number: a phone with an extension, or glued to a word, still names the customer.
		{"5550134x9 or tel5550134", "•••34x9 or tel•••34"},
		{"mailto:Dana.Whitfield%40example.com or xdana.whitfield@example.com", "mailto:•••@example.com or x•••@example.com"},
		{"amount 555.01", "amount 555.01"},
	} {
		p.DraftReply = c.text
		if got := p.MaskFor(agent).DraftReply; got != c.want {
			t.Errorf("%q masked as %q, want %q", c.text, got, c.want)
		}
	}
}

// A word of the name without a letter is no name: amounts and dates keep their digits.
func TestMaskForLeavesNumbersThatAreNoName(t *testing.T) {
	p := harborPackage(t)
	p.Contact = Contact{ID: "cust_1", DisplayName: "Kim 42"}
	p.DraftReply = "Kim paid $42.00 on the 42nd."
	if got := p.MaskFor(VisibilityFor(auth.RoleAgent, PIIRule{MinRole: "supervisor", EntityKeys: nil})).DraftReply; got != "K. paid $42.00 on the 42nd." {
		t.Errorf("masked as %q", got)
	}
}

// Where words are written without spaces between them, the name counts wherever it stands.
func TestMaskForFindsNamesInScriptsWithoutSpaces(t *testing.T) {
	p := harborPackage(t)
	p.Contact = Contact{ID: "cust_1", DisplayName: "王小明"}
	p.DraftReply = "王小明的账户被重复扣款。"
	if got := p.MaskFor(VisibilityFor(auth.RoleAgent, PIIRule{MinRole: "supervisor", EntityKeys: nil})).DraftReply; got != "王.的账户被重复扣款。" {
		t.Errorf("masked as %q", got)
	}
}

// Every free-text field goes through the mask, and the bot's flag is the only way out of it.
func TestMaskForCoversEveryFreeTextField(t *testing.T) {
	mention := "Dana Whitfield, dana.whitfield@example.com, 415-555-0134"
	masked := "D. W., •••@example.com, •••34"
	p := harborPackage(t)
	p.Reason = mention
	p.ProblemStatement = mention
	p.RecommendedNextStep = mention
	p.DraftReply = mention
	p.OpenQuestions = []string{mention}
	p.AttemptedActions[0].Result = mention
	p.Citations = []string{"mailto:dana.whitfield@example.com"}
	p.StructuredEntities["billing_name"] = StringEntity(mention)
	p.StructuredEntities["aliases"] = EntityValue{kind: EntityList, list: []string{"Dana", "D Whitfield"}}
	p.StructuredEntities["callback"] = NumberEntity("14155550134")
	agent := VisibilityFor(auth.RoleAgent, PIIRule{MinRole: "supervisor", EntityKeys: nil})

	got := p.MaskFor(agent)
	texts := map[string]string{
		"reason": got.Reason, "problem_statement": got.ProblemStatement, "recommended_next_step": got.RecommendedNextStep,
		"draft_reply": got.DraftReply, "open_questions": got.OpenQuestions[0], "attempted_actions.result": got.AttemptedActions[0].Result,
		"structured_entities.billing_name": got.StructuredEntities["billing_name"].Text(),
	}
	for field, text := range texts {
		if text != masked {
			t.Errorf("%s masked as %q, want %q", field, text, masked)
		}
	}
	if got.Citations[0] != "mailto:•••@example.com" || !slices.Equal(got.StructuredEntities["aliases"].List(), []string{"D.", "D W."}) ||
		got.StructuredEntities["callback"].Text() != "•••34" {
		t.Errorf("citation %q, list %v, number %v: want them masked", got.Citations[0], got.StructuredEntities["aliases"].List(), got.StructuredEntities["callback"])
	}
	if p.DraftReply != mention || p.OpenQuestions[0] != mention || p.AttemptedActions[0].Result != mention || p.Citations[0] != "mailto:dana.whitfield@example.com" {
		t.Error("masking changed the original package")
	}
	if sup := p.MaskFor(VisibilityFor(auth.RoleSupervisor, PIIRule{MinRole: "supervisor", EntityKeys: nil})); sup.DraftReply != mention {
		t.Errorf("a receiver who may see PII got %q", sup.DraftReply)
	}

	delete(p.PrivacyFlags, FlagPIIRedacted)
	if got := p.MaskFor(agent).DraftReply; got != masked {
		t.Errorf("without the flag the draft reply shows %q, want it masked: the bot vouched for nothing", got)
	}
	p.PrivacyFlags = map[string]bool{FlagPIIRedacted: true}
	vouched := p.MaskFor(agent)
	if vouched.DraftReply != mention || vouched.Contact.DisplayName != "D. W." {
		t.Errorf("with %s the free text is the bot's to redact and the contact is still masked: %q, %q",
			FlagPIIRedacted, vouched.DraftReply, vouched.Contact.DisplayName)
	}
}

// A note is masked whatever the bot vouched for: its author may have seen the contact.
func TestMaskNoteForIgnoresTheBotsFlag(t *testing.T) {
	p := harborPackage(t)
	p.PrivacyFlags = map[string]bool{FlagPIIRedacted: true}
	note := "Spoke to Dana on 415 555 0134"
	if got := p.MaskNoteFor(VisibilityFor(auth.RoleAgent, PIIRule{MinRole: "supervisor", EntityKeys: nil}), note); got != "Spoke to D. on •••34" {
		t.Errorf("note masked as %q", got)
	}
	if got := p.MaskNoteFor(VisibilityFor(auth.RoleSupervisor, PIIRule{MinRole: "supervisor", EntityKeys: nil}), note); got != note {
		t.Errorf("a receiver who may see PII got %q", got)
	}
}
