package approvals

import (
	"testing"
	"time"

	"github.com/handoffdesk/desk/internal/auth"
	"github.com/handoffdesk/desk/internal/desk"
)

func TestNeededComparesDecimalsExactly(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		amount, currency, threshold string
		want                        bool
	}{
		{"50.00", "USD", "50.0000", false},
		{"50", "USD", "50.0000", false},
		{"50.0001", "USD", "50.0000", true},
		// 0.1 + 0.2 is not 0.3 in float64; a threshold of 0.3 is not exceeded by 0.3.
		{"0.3", "USD", "0.3000", false},
		{"999999999999.9999", "USD", "999999999999.9998", true},
		{"1.00", "EUR", "50.0000", true},
	} {
		got, err := Needed(Refund{Amount: tc.amount, Currency: tc.currency}, tc.threshold, "USD")
		if err != nil || got != tc.want {
			t.Errorf("Needed(%s %s, threshold %s USD) = %v, %v; want %v", tc.amount, tc.currency, tc.threshold, got, err, tc.want)
		}
	}
	if _, err := Needed(Refund{Amount: "abc", Currency: "USD"}, "50", "USD"); err == nil {
		t.Error("Needed read abc as an amount")
	}
}

func TestCheckIsFourEyes(t *testing.T) {
	t.Parallel()
	now := time.Now()
	agent, holder, asker := int64(1), int64(2), int64(3)
	a := Approval{ID: 7, PublicID: "ho_1", RequestedBy: asker, State: Pending, ExpiresAt: now.Add(time.Hour)}
	sup := func(id int64) auth.User { return auth.User{ID: id, Role: auth.RoleSupervisor} }
	for _, tc := range []struct {
		name string
		user auth.User
		a    Approval
		code string
	}{
		{"an agent", auth.User{ID: agent, Role: auth.RoleAgent}, a, desk.Forbidden},
		{"the requester, a supervisor", sup(asker), a, desk.Forbidden},
		{"the holder, a supervisor", sup(holder), a, desk.Forbidden},
		{"an admin", auth.User{ID: 9, Role: auth.RoleAdmin}, a, ""},
		{"another supervisor", sup(9), a, ""},
		{"after a grant", sup(9), Approval{ID: 7, RequestedBy: asker, State: Granted, Decider: "Sue", ExpiresAt: now.Add(time.Hour)}, desk.Conflict},
		{"after the timeout", sup(9), Approval{ID: 7, RequestedBy: asker, State: Pending, ExpiresAt: now}, desk.Conflict},
	} {
		err := Check(tc.user, tc.a, &holder, now)
		if (tc.code == "" && err != nil) || (tc.code != "" && desk.ErrorCode(err) != tc.code) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.code)
		}
	}
}
