package server

import (
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/handoffdesk/desk/internal/actions"
	"github.com/handoffdesk/desk/internal/auth"
	"github.com/handoffdesk/desk/internal/board"
	"github.com/handoffdesk/desk/internal/handoff"
	"github.com/handoffdesk/desk/internal/metrics"
)

func TestEntitiesPutTheQueuesRequiredKeysFirst(t *testing.T) {
	t.Parallel()
	p := handoff.Package{StructuredEntities: map[string]handoff.EntityValue{
		"account_id": handoff.StringEntity("acct_1"), "amount": handoff.StringEntity("49.99"),
		"order_id": handoff.StringEntity("o_7"), "plan": handoff.StringEntity("pro"), "zone": handoff.StringEntity("eu"),
	}}
	for _, tc := range []struct {
		required []string
		limit    int
		want     string
	}{
		{nil, 0, "[account_id amount order_id plan zone]"},
		{[]string{"zone", "order_id"}, 3, "[zone order_id account_id]"},
		{[]string{"missing", "plan"}, 2, "[plan account_id]"},
	} {
		var got []string
		for _, e := range entities(p, tc.required, tc.limit) {
			got = append(got, e.Key)
		}
		if fmt.Sprint(got) != tc.want {
			t.Errorf("required %v, limit %d: %s, want %s", tc.required, tc.limit, got, tc.want)
		}
	}
}

func TestCitationsLinkOnlyAllowedSchemes(t *testing.T) {
	t.Parallel()
	s, err := New(Config{BaseURL: "http://localhost:8080", CitationSchemes: []string{"crm", "Policy:"}},
		slog.New(slog.DiscardHandler), nil, nil, nil, nil, nil, nil, nil, nil, metrics.New(nil), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		uri    string
		linked bool
	}{
		{"https://kb.example.com/refunds#partial", true},
		{"http://intranet.example/kb/42", true},
		{"HTTPS://KB.EXAMPLE.COM/", true},
		{"crm://accounts/acct_1", true},
		{"policy:refunds/3.2", true},
		{"ms-msdt:/id PCWDiagnostic /skip force", false},
		{"search-ms:query=invoice&crumb=location:\\\\evil.example\\share", false},
		{"intent://scan/#Intent;scheme=zxing;package=com.example;end", false},
		{"javascript:alert(1)", false},
		{"JavaScript:alert(1)", false},
		{"vbscript:msgbox(1)", false},
		{"data:text/html,<script>alert(1)</script>", false},
		{"file:///etc/passwd", false},
		{"blob:https://kb.example.com/0c4f", false},
		{"mailto:billing@example.com", false},
		{"tel:+15550100", false},
		{"//kb.example.com/no-scheme", false},
		{"/kb/relative", false},
		{"crm-admin://accounts/acct_1", false},
		{"https://kb.example.com/%zz", false},
	} {
		href := s.citations.href(tc.uri)
		if tc.linked && href != tc.uri || !tc.linked && href != "" {
			t.Errorf("%q: href %q, want linked %v", tc.uri, href, tc.linked)
		}
	}
}

func TestCitationSchemesThatRunScriptAreRefused(t *testing.T) {
	t.Parallel()
	for _, schemes := range [][]string{{"crm", "javascript"}, {"DATA:"}, {"file"}, {"vbscript"}, {"blob"}, {"not a scheme"}, {"9crm"}} {
		_, err := New(Config{BaseURL: "http://localhost:8080", CitationSchemes: schemes},
			slog.New(slog.DiscardHandler), nil, nil, nil, nil, nil, nil, nil, nil, metrics.New(nil), nil)
		if err == nil || !strings.Contains(err.Error(), "CITATION_SCHEMES") {
			t.Errorf("CITATION_SCHEMES %v: err %v, want a refusal naming the setting", schemes, err)
		}
	}
}

// A citation that names the contact is masked like the rest of the free text, and what masking
// left of it links nowhere.
func TestMaskedCitationShowsAsText(t *testing.T) {
	t.Parallel()
	item := board.Item{PIIMinRole: "supervisor", Package: handoff.Package{
		Contact:   handoff.Contact{ID: "cust_1", DisplayName: "Dana Whitfield"},
		Citations: []string{"crm://contacts/dana-whitfield", "crm://ticket/8812"},
	}}
	links := citationLinks{"https", "http", "crm"}
	agent := handoffView(item, auth.User{Role: auth.RoleAgent}, actions.Permissions{}, nil, links)
	if fmt.Sprint(agent.Citations) != "[{crm://contacts/D.-W. } {crm://ticket/8812 crm://ticket/8812}]" {
		t.Errorf("the agent's citations %v", agent.Citations)
	}
	sup := handoffView(item, auth.User{Role: auth.RoleSupervisor}, actions.Permissions{}, nil, links)
	if sup.Citations[0].Href != "crm://contacts/dana-whitfield" {
		t.Errorf("the supervisor's citation %v", sup.Citations[0])
	}
}
