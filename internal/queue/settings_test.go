package queue

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/handoffdesk/desk/internal/desk"
)

// Each setting reads back what it shows: a queue saved from its own form, untouched, is the same
// queue. A setting added to Settings with a Get and a Set that disagree fails here.
func TestSettingsReadBackWhatTheyShow(t *testing.T) {
	t.Parallel()
	parent := int64(7)
	q := Defaults()
	q.ID, q.Name, q.ParentID, q.Skills, q.PIIEntityKeys = 9, "vip", &parent, []string{"refunds", "de"}, []string{"account_id"}
	q.Guards.PairCooldown, q.SLA, q.AcceptsTopLevelTransfers, q.Guards.OneOpen = 90*time.Second, 90*time.Minute, false, false
	got, err := Read(Values(q), Queue{ID: 9, Enabled: true}, []Queue{{ID: 7, Name: "top"}, q})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, q) {
		t.Errorf("read back %+v\nwant %+v", got, q)
	}
	if len(Changes(q, got)) != 0 {
		t.Errorf("an untouched form changes %v", Changes(q, got))
	}
}

// Every bad setting is named at once, each on its own field.
func TestReadNamesEveryBadField(t *testing.T) {
	t.Parallel()
	values := Values(Defaults())
	values["name"] = []string{"Bad Name"}
	values["ttl"] = []string{"30s"}
	values["default_priority"] = []string{"asap"}
	values["transfer_policy"] = []string{"anywhere"}
	values["pii_entity_keys"] = []string{"ok, not ok"}
	values["overflow_policy"] = []string{"route"}
	values[FieldParent] = []string{"42"}
	_, err := Read(values, Queue{ID: 1}, []Queue{{ID: 1, Name: "self"}})
	bad := desk.FieldsOf(err)
	for _, field := range []string{"name", "ttl", "default_priority", "transfer_policy", "pii_entity_keys", FieldOverflow, FieldParent} {
		if bad[field] == "" {
			t.Errorf("field %s: no complaint in %v", field, bad)
		}
	}
	if len(bad) != 7 {
		t.Errorf("%d complaints, want 7: %v", len(bad), bad)
	}
}

// Each setting names its own column, one that scanQueue reads back: Save writes exactly the
// settings, and a setting whose column is not read would be saved and never seen again.
func TestEachSettingHasItsColumn(t *testing.T) {
	t.Parallel()
	read := map[string]bool{}
	for _, c := range strings.Split(columns, ",") {
		read[strings.TrimSuffix(strings.TrimSpace(c), "::text")] = true
	}
	seen := map[string]bool{}
	for _, s := range Settings() {
		if s.Column == "" || s.Value == nil || s.Get == nil || s.Set == nil || s.Help == "" || s.Label == "" {
			t.Errorf("setting %s lacks a column, a value, a getter, a setter, a label or a help line", s.Field)
		}
		if seen[s.Column] || !read[s.Column] {
			t.Errorf("setting %s: column %q is taken twice or not among the columns scanQueue reads", s.Field, s.Column)
		}
		seen[s.Column] = true
	}
}

// A customer is idle before they are gone: customer_gone shorter than customer_idle is refused on
// its own field, 0s switches it off, and a new queue shows idle after 10 minutes and never resolves.
func TestCustomerGoneComesAfterIdle(t *testing.T) {
	t.Parallel()
	if q := Defaults(); q.CustomerIdle != 10*time.Minute || q.CustomerGone != 0 {
		t.Errorf("defaults: idle %s, gone %s; want 10m and off", q.CustomerIdle, q.CustomerGone)
	}
	base := Defaults()
	base.Name = "billing"
	values := Values(base)
	values["customer_idle"], values["customer_gone"] = []string{"15m"}, []string{"5m"}
	_, err := Read(values, Queue{ID: 1}, nil)
	if bad := desk.FieldsOf(err); len(bad) != 1 || !strings.Contains(bad["customer_gone"], "shorter than customer idle 15m") {
		t.Errorf("gone before idle: %v", bad)
	}
	values["customer_idle"] = []string{"0s"}
	_, err = Read(values, Queue{ID: 1}, nil)
	if bad := desk.FieldsOf(err); bad["customer_idle"] == "" {
		t.Errorf("idle of 0s: %v, want it refused as shorter than a second", bad)
	}
	values["customer_idle"], values["customer_gone"] = []string{"15m"}, []string{"0s"}
	if q, err := Read(values, Queue{ID: 1}, nil); err != nil || q.CustomerGone != 0 || q.CustomerIdle != 15*time.Minute {
		t.Errorf("gone switched off: %+v, %v", q, err)
	}
	values["customer_gone"] = []string{"1h"}
	if q, err := Read(values, Queue{ID: 1}, nil); err != nil || q.CustomerGone != time.Hour {
		t.Errorf("gone after an hour: %v, %v", q.CustomerGone, err)
	}
}

// The help of "Max rejections" says what the desk does at the limit (actions.Reject sets
// needs_supervisor, which only a supervisor's claim takes), not what it once did.
func TestMaxRejectionsHelpSaysWhatRejectDoes(t *testing.T) {
	t.Parallel()
	for _, s := range Settings() {
		if s.Field != "max_rejections" {
			continue
		}
		if !strings.Contains(s.Help, "supervisor") || strings.Contains(s.Help, "bot") {
			t.Errorf("max_rejections help %q: want it to say the package waits for a supervisor", s.Help)
		}
		return
	}
	t.Fatal("no max_rejections setting")
}
