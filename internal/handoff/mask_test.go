package handoff

import (
	"strings"
	"testing"

	"github.com/handoffdesk/desk/internal/auth"
)

func TestMaskForHidesPIIBelowTheQueueSetting(t *testing.T) {
	p := harborPackage(t)
	agent := VisibilityFor(auth.RoleAgent, "supervisor", []string{"account_id"})
	masked := p.MaskFor(agent)
	for _, leak := range []string{"Dana", "Whitfield", "dana.whitfield", "555-0134", "acct_9912"} {
		if strings.Contains(masked.Contact.DisplayName+masked.Contact.Email+masked.Contact.Phone+masked.StructuredEntities["account_id"].Text(), leak) {
			t.Errorf("agent view leaks %q: %+v", leak, masked.Contact)
		}
	}
	if masked.Contact.DisplayName != "D. W." || masked.Contact.Email != "•••@example.com" || masked.Contact.Phone != "•••34" {
		t.Errorf("masked contact %+v", masked.Contact)
	}
	if masked.Transcript != nil || masked.StructuredEntities["product_sku"].Text() != "PRO-MONTHLY" {
		t.Errorf("transcript must go, non-PII entities stay: %v %v", masked.Transcript, masked.StructuredEntities)
	}
	if p.Contact.DisplayName != "Dana Whitfield" || p.StructuredEntities["account_id"].Text() != "acct_9912" {
		t.Error("masking changed the original package")
	}
	supervisor := p.MaskFor(VisibilityFor(auth.RoleSupervisor, "supervisor", []string{"account_id"}))
	if supervisor.Contact.Email != p.Contact.Email || len(supervisor.Transcript) != len(p.Transcript) {
		t.Error("a supervisor sees PII in a queue whose setting is supervisor")
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
