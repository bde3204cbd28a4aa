package views

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/a-h/templ"
)

// FormatAge renders a wait the way agents read a timer: "45s", "12m", "3h 05m", "2d 4h".
func FormatAge(d time.Duration) string {
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 24*time.Hour:
		return fmt.Sprintf("%dh %02dm", int(d.Hours()), int(d.Minutes())%60)
	default:
		return fmt.Sprintf("%dd %dh", int(d.Hours())/24, int(d.Hours())%24)
	}
}

// FormatSpan is FormatAge to the second under an hour, for lengths people compare rather than
// watch run (a time to accept, how long a ring rang): "45s", "17m", "17m 05s", "1h 05m". Every
// duration the desk shows is one or the other, in the same notation.
func FormatSpan(d time.Duration) string {
	d = d.Round(time.Second)
	if d < time.Minute || d >= time.Hour || d%time.Minute == 0 {
		return FormatAge(d)
	}
	return fmt.Sprintf("%dm %02ds", int(d.Minutes()), int(d.Seconds())%60)
}

func contains(list []string, s string) bool { return slices.Contains(list, s) }

// Words writes a code as the page says it: "awaiting_approval" as "awaiting approval",
// "resolved_by_policy" as "resolved by policy". Values sent back in forms stay codes.
func Words(code string) string { return strings.ReplaceAll(code, "_", " ") }

// inputType is the HTML type of a form field's input.
func inputType(input string) string {
	switch input {
	case "email", "password", "number":
		return input
	}
	return "text"
}

// invalidField marks a filter's field refused, pointing to its complaint; nothing when it is not.
func invalidField(name, complaint string) templ.Attributes {
	if complaint == "" {
		return nil
	}
	return templ.Attributes{"aria-invalid": "true", "aria-describedby": "audit-error-" + name}
}

// FormatDue says how much of an SLA is left, or by how much it is over: "12m left", "3m over".
func FormatDue(left time.Duration) string {
	if left < 0 {
		return FormatAge(-left) + " over"
	}
	return FormatAge(left) + " left"
}

// TimelineTime is when something happened, to the second, in UTC as every time on the desk.
func TimelineTime(t time.Time) string { return t.UTC().Format("Jan 2 15:04:05") }

// MineSort orders "My work" as the page and the socket's rows both place it: the customers waiting
// for an answer first, longest waiting on top; then the packages whose SLA runs out first; then
// those accepted with nobody waiting.
func MineSort(r MineRow) string {
	if r.Card.Waiting != nil {
		// Customers waiting for an answer first, the one who waited longest on top.
		return fmt.Sprintf("0-%016d-%s", r.Card.Waiting.Since.UnixMilli(), r.Card.SortKey)
	}
	if r.Due.IsZero() {
		return fmt.Sprintf("2-%016d-%s", r.Card.SLASince.UnixMilli(), r.Card.SortKey)
	}
	return fmt.Sprintf("1-%016d-%s", r.Due.UnixMilli(), r.Card.SortKey)
}

// colonBefore ends a timeline line's words with a colon when what a person wrote follows them.
func colonBefore(note string) string {
	if note == "" {
		return ""
	}
	return ":"
}

// unreadTitle is what a page's title starts with while the viewer's customers wait: the count of
// their unanswered messages, which the socket keeps current (desk.js).
func unreadTitle(v *Viewer) string {
	if v == nil || v.Unread == 0 {
		return ""
	}
	return fmt.Sprintf("(%d) ", v.Unread)
}
