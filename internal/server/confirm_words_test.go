package server

import (
	"strings"
	"testing"

	"github.com/handoffdesk/desk/internal/access"
	"github.com/handoffdesk/desk/internal/actions"
)

// The confirmations say in words what the numbers are: one or many, none, and what the
// confirmation page's HTTP tests do not reach (withdrawn approvals, a webhook URL).
func TestConfirmationWords(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		got  []string
		want string
	}{
		{disableConsequences("Dana", access.DisableImpact{}), "Dana can no longer log in, with a password or single sign-on.\n" +
			"They have no open session.\nThey hold no package.\n" +
			"You can enable them again later; the packages do not come back to them."},
		{disableConsequences("Dana", access.DisableImpact{Sessions: 2, Held: []actions.Held{{Queue: "billing_t2", Packages: 1, AwaitingApproval: 1}}}),
			"Dana can no longer log in, with a password or single sign-on.\n" +
				"Their 2 open sessions end: every page they have open goes to the login page.\n" +
				"1 held package goes back to billing_t2, for the next agent.\n" +
				"The refund approval they asked for is withdrawn, and its bot is told.\n" +
				"You can enable them again later; the packages do not come back to them."},
		{revokeConsequences("tier1", "hdk_ab12", "https://bot.example/hook", 1),
			"The bot's requests with key tier1 (hdk_ab12…) are refused from the next one, on every instance.\n" +
				"This cannot be undone: the bot will need a new key.\n" +
				"Its 1 open package stays in its queue for the agents; the desk goes on sending its webhooks to https://bot.example/hook."},
		{revokeConsequences("tier1", "hdk_ab12", "", 0),
			"The bot's requests with key tier1 (hdk_ab12…) are refused from the next one, on every instance.\n" +
				"This cannot be undone: the bot will need a new key.\nIt has no open package."},
	} {
		if got := strings.Join(c.got, "\n"); got != c.want {
			t.Errorf("got\n%s\nwant\n%s", got, c.want)
		}
	}
}
