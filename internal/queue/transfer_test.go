package queue

import (
	"strings"
	"testing"

	"github.com/handoffdesk/desk/internal/desk"
)

func TestCheckTransfer(t *testing.T) {
	t.Parallel()
	id := func(n int64) *int64 { return &n }
	all := []string{"children", "parent", "peers"}
	var (
		billing  = Queue{ID: 1, Name: "billing", TransferPolicy: all}
		refunds  = Queue{ID: 2, Name: "refunds", ParentID: id(1), TransferPolicy: all}
		disputes = Queue{ID: 3, Name: "disputes", ParentID: id(1), TransferPolicy: all}
		tech     = Queue{ID: 4, Name: "tech", TransferPolicy: all}
		hardware = Queue{ID: 5, Name: "hardware", ParentID: id(4), TransferPolicy: all}
		open     = Queue{ID: 6, Name: "open", TransferPolicy: all, AcceptsTopLevelTransfers: true}
	)
	policy := func(q Queue, rules ...string) Queue { q.TransferPolicy = rules; return q }
	cases := []struct {
		name     string
		from, to Queue
		code     string // "" when allowed
		says     string
	}{
		{"to a child", billing, refunds, "", ""},
		{"to the parent", refunds, billing, "", ""},
		{"to a sibling", refunds, disputes, "", ""},
		{"to a top-level queue that accepts top-level transfers", billing, open, "", ""},
		{"to itself", billing, billing, desk.Invalid, "already in billing"},
		{"to a child, not in the policy", policy(billing, "parent", "peers"), refunds, desk.Forbidden, "does not allow refunds, its child"},
		{"to the parent, not in the policy", policy(refunds, "children"), billing, desk.Forbidden, "does not allow billing, its parent"},
		{"to a sibling, not in the policy", policy(refunds), disputes, desk.Forbidden, "transfer policy (none) does not allow disputes, its sibling"},
		{"to another top-level queue", billing, tech, desk.Forbidden, "tech does not accept transfers from other top-level queues"},
		{"to an accepting top-level queue, peers not in the policy", policy(billing, "children"), open, desk.Forbidden, "does not allow open, its top-level peer"},
		{"from a child to an accepting top-level queue", refunds, open, desk.Forbidden, "open is not a child, the parent or a sibling of refunds"},
		{"to a cousin", refunds, hardware, desk.Forbidden, "not a child, the parent or a sibling"},
		{"to another tree's child", billing, hardware, desk.Forbidden, "not a child, the parent or a sibling"},
	}
	for _, c := range cases {
		err := CheckTransfer(c.from, c.to)
		if c.code == "" {
			if err != nil {
				t.Errorf("%s: %v, want it allowed", c.name, err)
			}
			continue
		}
		if desk.ErrorCode(err) != c.code || !strings.Contains(desk.ErrorMessage(err), c.says) {
			t.Errorf("%s: %v, want a %s error saying %q", c.name, err, c.code, c.says)
		}
	}
}
