package views

import "strings"

// viewingText names who else is viewing: "Alex is viewing", "Alex and Bea are viewing", "Alex, Bea
// and Cy are viewing".
func viewingText(names []string) string {
	switch len(names) {
	case 1:
		return names[0] + " is viewing"
	default:
		return strings.Join(names[:len(names)-1], ", ") + " and " + names[len(names)-1] + " are viewing"
	}
}
