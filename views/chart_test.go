package views

import (
	"strings"
	"testing"
)

// A bucket without drafts breaks the line instead of joining its neighbours across the gap, and
// the bars are scaled to the largest median.
func TestTrendChartBreaksOverEmptyBuckets(t *testing.T) {
	t.Parallel()
	half, full, ten, twenty := 0.5, 1.0, 10.0, 20.0
	c := NewTrendChart([]TrendPoint{
		{Label: "a", AsIs: &half, MedianChars: &ten},
		{Label: "b"},
		{Label: "c", AsIs: &full, MedianChars: &twenty},
	}, "")
	if got := strings.Count(c.AsIsPath, "M"); got != 2 || strings.Contains(c.AsIsPath, "L") {
		t.Errorf("as-is path %q: want two separate points, no line across the empty bucket", c.AsIsPath)
	}
	if c.ReturnPath != "" {
		t.Errorf("return path %q without any return rate", c.ReturnPath)
	}
	if len(c.Bars) != 2 || c.MaxChars != "20" || c.Bars[1].H != f1(chartBottom-chartTop) || c.Bars[0].H != f1((chartBottom-chartTop)/2.0) {
		t.Errorf("bars %+v with scale %s: want two, the larger full height", c.Bars, c.MaxChars)
	}
}
