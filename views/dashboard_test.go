package views

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// The roster's reassign select starts, marked selected, on the first agent with room: a select
// the browser moved past a full agent by itself would look changed to the page's script, which
// then leaves the roster as it was rather than replace a choice being made.
func TestRosterMoveStartsOnTheFirstWithRoom(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	h := HeldRow{ID: "ho_1", Holder: "alex", Move: ReassignControls{Self: "sam@example.com", Members: []ReassignMember{
		{Email: "ada@example.com", Name: "ada", Room: 0}, {Email: "blake@example.com", Name: "blake", Room: 2}}}}
	if err := RosterMove(h).Render(context.Background(), &buf); err != nil {
		t.Fatal(err)
	}
	page := buf.String()
	for _, want := range []string{`<option value="ada@example.com" disabled>ada · full</option>`,
		`<option value="blake@example.com" selected>blake · room for 2</option>`, `name="to" value="sam@example.com"`} {
		if !strings.Contains(page, want) {
			t.Errorf("the controls lack %s:\n%s", want, page)
		}
	}
	buf.Reset()
	h.Move.Self = ""
	if err := RosterMove(h).Render(context.Background(), &buf); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(buf.String(), "Take over") {
		t.Errorf("the holder is offered to take over their own package")
	}
}
