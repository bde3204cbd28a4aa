package evals

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/handoffdesk/desk/internal/desk"
)

func TestParseReplyNamesTheFieldAtFault(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		text, editing string
		tags          []string
		field         string
	}{
		{"   ", "", nil, "text"},
		{strings.Repeat("é", MaxReplyChars+1), "", nil, "text"},
		{"ok", "", []string{"tone", "rude"}, "tags"},
		{"ok", "-5", nil, "editing_ms"},
		{"ok", "soon", nil, "editing_ms"},
	} {
		_, err := ParseReply(tc.text, tc.tags, tc.editing)
		var e *desk.Error
		if desk.ErrorCode(err) != desk.Invalid || !errors.As(err, &e) || e.Details["field"] != tc.field {
			t.Errorf("ParseReply(%.20q, %v, %q) = %v, want a 422 naming %s", tc.text, tc.tags, tc.editing, err, tc.field)
		}
	}
	r, err := ParseReply(strings.Repeat("é", MaxReplyChars), []string{"tone", "other", "tone"}, "90000000000")
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(r.Tags) != "[other tone]" || r.Editing != MaxEditing {
		t.Errorf("tags %v, editing %s; want each tag once and the time bounded to %s", r.Tags, r.Editing, MaxEditing)
	}
	if r, _ := ParseReply("ok", nil, "1500"); r.Editing != 1500*time.Millisecond || r.Tags == nil {
		t.Errorf("editing %s, tags %#v; want 1.5s and no tags", r.Editing, r.Tags)
	}
}

func TestEscalationNeeded(t *testing.T) {
	t.Parallel()
	for code, want := range map[string]bool{"resolved_by_policy": false, "wrong_escalation": false, "needs_more_info": true, "duplicate": true} {
		if EscalationNeeded(code) != want {
			t.Errorf("EscalationNeeded(%s) = %v, want %v", code, !want, want)
		}
	}
}
