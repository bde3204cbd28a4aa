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

// A sparkline breaks over empty buckets, marks a lone value with a dot, and puts the largest
// value at the top.
func TestSparklineBreaksAndDots(t *testing.T) {
	t.Parallel()
	one, two, four := 1.0, 2.0, 4.0
	s := NewSparkline([]*float64{&one, &two, nil, &four, nil}, "")
	if strings.Count(s.Path, "M") != 1 || strings.Count(s.Path, "L") != 1 {
		t.Errorf("path %q: want one segment of two points", s.Path)
	}
	if len(s.Dots) != 1 || s.Dots[0].Y != f1(sparkPad) {
		t.Errorf("dots %+v: want one, at the top", s.Dots)
	}
	bars := NewBars([]string{"a", "b"}, []int{5, 10}, []string{"", ""})
	if bars[0].Width != "50.0" || bars[1].Width != "100.0" {
		t.Errorf("bars %+v: want 50%% and 100%%", bars)
	}
}
