package handoff

import (
	"slices"
	"strings"

	"github.com/handoffdesk/desk/internal/auth"
)

// Masked is the placeholder for a value the receiver may not see.
const Masked = "•••"

// Visibility is what one receiver may see of packages in one queue.
type Visibility struct {
	PII           bool     // contact details, transcript and PII entities unmasked
	PIIEntityKeys []string // the queue's entity keys that count as PII
}

// VisibilityFor applies a queue's setting (the least role that sees PII) to a receiver's role.
func VisibilityFor(role auth.Role, piiMinRole string, piiEntityKeys []string) Visibility {
	return Visibility{PII: role.AtLeast(auth.Role(piiMinRole)), PIIEntityKeys: piiEntityKeys}
}

// MaskFor returns a copy of p with what v may not see replaced, so that masked values never
// reach a view, a websocket frame or an export. The transcript is dropped entirely: a partly
// masked conversation still leaks.
func (p Package) MaskFor(v Visibility) Package {
	if v.PII {
		return p
	}
	p.Contact.DisplayName = maskName(p.Contact.DisplayName)
	p.Contact.Email = maskEmail(p.Contact.Email)
	p.Contact.Phone = maskPhone(p.Contact.Phone)
	p.Transcript = nil
	if len(v.PIIEntityKeys) > 0 && len(p.StructuredEntities) > 0 {
		entities := make(map[string]EntityValue, len(p.StructuredEntities))
		for k, val := range p.StructuredEntities {
			if slices.Contains(v.PIIEntityKeys, k) {
				val = StringEntity(Masked)
			}
			entities[k] = val
		}
		p.StructuredEntities = entities
	}
	return p
}

// maskName keeps initials: "Dana Whitfield" → "D. W.", enough to greet nobody by name.
func maskName(name string) string {
	if name == "" {
		return ""
	}
	var parts []string
	for _, word := range strings.Fields(name) {
		parts = append(parts, string([]rune(word)[0])+".")
	}
	return strings.Join(parts, " ")
}

// maskEmail keeps the domain, which tells an agent which company without naming the person.
func maskEmail(email string) string {
	if email == "" {
		return ""
	}
	if at := strings.LastIndex(email, "@"); at > 0 {
		return Masked + email[at:]
	}
	return Masked
}

// maskPhone keeps the last two digits, enough to confirm with a caller who reads them out.
func maskPhone(phone string) string {
	digits := []rune{}
	for _, r := range phone {
		if r >= '0' && r <= '9' {
			digits = append(digits, r)
		}
	}
	if len(digits) < 4 {
		return Masked
	}
	return Masked + string(digits[len(digits)-2:])
}
