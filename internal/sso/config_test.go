package sso

import (
	"slices"
	"strings"
	"testing"

	"github.com/handoffdesk/desk/internal/desk"
)

func TestParseDomains(t *testing.T) {
	t.Parallel()
	got, err := ParseDomains(" Example.com, ,example.org ")
	if err != nil || !slices.Equal(got, []string{"example.com", "example.org"}) {
		t.Errorf("ParseDomains = %v, %v; want the two domains in lower case", got, err)
	}
	for _, bad := range []string{"@example.com", "example", "https://example.com", "a b.com"} {
		if _, err := ParseDomains(bad); err == nil || !strings.Contains(err.Error(), "OIDC_ALLOWED_DOMAINS") {
			t.Errorf("ParseDomains(%q) = %v, want an error naming OIDC_ALLOWED_DOMAINS", bad, err)
		}
	}
}

func TestAllowedDomain(t *testing.T) {
	t.Parallel()
	s := &Service{cfg: Config{AllowedDomains: []string{"example.com"}}}
	if err := s.allowedDomain("Dana@EXAMPLE.com"); err != nil {
		t.Errorf("an allowed domain in upper case: %v", err)
	}
	for _, email := range []string{"eve@example.com.evil.org", "eve@sub.example.com", "eve@evil.org"} {
		if err := s.allowedDomain(email); desk.ErrorCode(err) != desk.Forbidden {
			t.Errorf("%s: %v, want forbidden", email, err)
		}
	}
	if err := (&Service{}).allowedDomain("anyone@anywhere.org"); err != nil {
		t.Errorf("no allowed domains set: %v, want any domain", err)
	}
}
