package views

import "strings"

// Figure is a number as the dashboard and the evals page print it: text, with each count in it a
// link to the packages it counts (/packages with the filters that produced it).
type Figure []FigurePart

// FigurePart is a run of a figure's text; a count has the link to its packages.
type FigurePart struct {
	Text string
	// Href is the /packages link of the packages the count counts; "" for plain text.
	Href string
	// Counts says which number of /packages the count is: "packages", or "records" for a count of
	// replies, outcomes or decisions (which /packages counts beside the packages holding them).
	Counts string
}

// Text is the figure as plain text.
func (f Figure) Text() string {
	var b strings.Builder
	for _, p := range f {
		b.WriteString(p.Text)
	}
	return b.String()
}

// Plain is a figure without a count to link.
func Plain(text string) Figure { return Figure{{Text: text}} }
