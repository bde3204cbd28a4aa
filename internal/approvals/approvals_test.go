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

// Money shows amounts with their currency's decimals and never rounds one away.
func TestMoneyHasItsCurrencysDecimals(t *testing.T) {
	for _, tc := range []struct{ amount, currency, want string }{
		{"50.0000", "USD", "50.00 USD"},
		{"12", "EUR", "12.00 EUR"},
		{"1200.00", "JPY", "1200 JPY"},
		{"3.5", "KWD", "3.500 KWD"},
		{"49.995", "USD", "49.995 USD"},
		{"7", "XYZ", "7.00 XYZ"},
	} {
		if got := Money(tc.amount, tc.currency); got != tc.want {
			t.Errorf("Money(%s, %s) = %q, want %q", tc.amount, tc.currency, got, tc.want)
		}
	}
}

// The reason a refund needs approval names what is wrong with it: another currency is no amount
// above a threshold.
func TestWhySaysWhichRuleApplies(t *testing.T) {
	for _, tc := range []struct {
		r    Refund
		want string
	}{
		{Refund{"12.00", "EUR"}, "12.00 EUR is in another currency than billing_t2's USD threshold"},
		{Refund{"240", "USD"}, "a refund of 240.00 USD is above billing_t2's threshold of 50.00 USD"},
		{Refund{"50.00", "USD"}, "the refund of 50.00 USD is not above billing_t2's threshold of 50.00 USD"},
	} {
		if got := Why(tc.r, "billing_t2", "50.0000", "USD"); got != tc.want {
			t.Errorf("Why(%v) = %q, want %q", tc.r, got, tc.want)
		}
	}
}
