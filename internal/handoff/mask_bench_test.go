package handoff

import (
	"testing"

	"github.com/handoffdesk/desk/internal/auth"
)

// BenchmarkMaskFor measures masking the Harbor package for an agent, free text included, against
// masking the contact alone (the bot vouched for its text) and against a receiver who sees PII.
func BenchmarkMaskFor(b *testing.B) {
	p := harborPackage(b)
	agent := VisibilityFor(auth.RoleAgent, PIIRule{MinRole: "supervisor", EntityKeys: []string{"account_id"}})
	vouched := p
	vouched.PrivacyFlags = map[string]bool{FlagPIIRedacted: true}
	for _, c := range []struct {
		name string
		p    Package
		v    Visibility
	}{
		{"sees_pii", p, VisibilityFor(auth.RoleSupervisor, PIIRule{MinRole: "supervisor", EntityKeys: nil})},
		{"contact_only", vouched, agent},
		{"free_text", p, agent},
	} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				_ = c.p.MaskFor(c.v)
			}
		})
	}
}
