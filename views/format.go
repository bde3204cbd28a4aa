package views

import (
	"fmt"
	"slices"
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

func contains(list []string, s string) bool { return slices.Contains(list, s) }

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
