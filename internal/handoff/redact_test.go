package handoff

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/handoffdesk/desk/internal/auth"
)

// Redaction puts one placeholder per value wherever the value stands, free text and transcript
// included, and leaves nothing of the customer behind, whatever the bot vouched for.
func TestRedactForReplacesTheCustomerWithPlaceholders(t *testing.T) {
	p := harborPackage(t) // Dana Whitfield, dana.whitfield@example.com, +1-415-555-0134, acct_9912
	p.PrivacyFlags = map[string]bool{FlagPIIRedacted: true}
	p.Transcript = append(p.Transcript, Turn{Role: RoleUser, Content: "It's Dana WHITFIELD, account acct_9912, call 415 555 0134 or mail dana.whitfield@example.com"})
	keys := []string{"account_id", "charge_ids"}
	red, r := p.RedactFor(VisibilityFor(auth.RoleAdmin, PIIRule{MinRole: "supervisor", EntityKeys: keys}))
	if red.Contact.DisplayName != "<NAME_1> <NAME_2>" || red.Contact.Email != "<EMAIL_1>" || red.Contact.Phone != "<PHONE_1>" {
		t.Errorf("contact %+v", red.Contact)
	}
	if got := red.Transcript[len(red.Transcript)-1].Content; got != "It's <NAME_1> <NAME_2>, account <ACCOUNT_ID_1>, call <PHONE_1> or mail <EMAIL_1>" {
		t.Errorf("transcript turn %q", got)
	}
	if got := red.DraftReply; !strings.HasPrefix(got, "Hi <NAME_1>, I can see") {
		t.Errorf("draft %q", got)
	}
	if got := r.Text("Thanks Dana — refund on ch_44c, not ch_44b."); got != "Thanks <NAME_1> — refund on <CHARGE_IDS_2>, not <CHARGE_IDS_1>." {
		t.Errorf("reply %q", got)
	}
	// An address percent-encoded, in a mailto: link or glued to a word is the address all the same.
	if got := r.Text("Write to dana.whitfield%40example.com, <a href=\"mailto:Dana.Whitfield@example.com?subject=refund\">, or Email:dana.whitfield@example.com"); got != "Write to <EMAIL_1>, <a href=\"mailto:<EMAIL_1>?subject=refund\">, or Email:<EMAIL_1>" {
		t.Errorf("email spellings %q", got)
	}
	if red.StructuredEntities["product_sku"].Text() != "PRO-MONTHLY" || red.StructuredEntities["account_id"].Text() != "<ACCOUNT_ID_1>" {
		t.Errorf("entities %v", red.StructuredEntities)
	}
	all, err := json.Marshal(red)
	if err != nil {
		t.Fatal(err)
	}
	for _, leak := range []string{"Dana", "dana", "Whitfield", "WHITFIELD", "555", "0134", "acct_9912", "ch_44"} {
		if strings.Contains(string(all), leak) {
			t.Errorf("the redacted package still holds %q", leak)
		}
	}
	if p.Contact.DisplayName != "Dana Whitfield" {
		t.Error("redaction changed the original package")
	}
	agent, _ := p.RedactFor(VisibilityFor(auth.RoleAgent, PIIRule{MinRole: "supervisor", EntityKeys: keys}))
	if got := agent.Transcript[len(agent.Transcript)-1].Content; got != red.Transcript[len(red.Transcript)-1].Content {
		t.Errorf("below the PII role the transcript is redacted as for any role: %q", got)
	}
	withheld, _ := p.RedactFor(VisibilityFor(auth.RoleAgent, PIIRule{MinRole: "supervisor", EntityKeys: keys, WithholdTranscript: true}))
	if withheld.Transcript != nil {
		t.Error("a transcript the queue withholds is redacted rather than dropped")
	}
}
