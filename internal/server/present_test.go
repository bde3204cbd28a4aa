package server

import (
	"fmt"
	"testing"

	"github.com/handoffdesk/desk/internal/handoff"
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
