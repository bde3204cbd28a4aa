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

// A series chart breaks its line over empty buckets and draws every value as a dot, so that a
// series of one point shows; its value axis runs from 0 to the largest value, labelled.
func TestSeriesChartDrawsEveryPoint(t *testing.T) {
	t.Parallel()
	one, two, four := 1.0, 2.0, 4.0
	label := func(v float64) string { return f1(v) }
	s := NewSeriesChart([]*float64{&one, &two, nil, &four, nil}, []string{"a", "b", "c", "d", "e"}, false, label, "")
	if strings.Count(s.Path, "M") != 2 || strings.Count(s.Path, "L") != 1 {
		t.Errorf("path %q: want a segment of two points and a lone one", s.Path)
	}
	if len(s.Dots) != 3 || s.Dots[2].Y != f1(seriesTop) {
		t.Errorf("dots %+v: want three, the largest at the top", s.Dots)
	}
	if len(s.YTicks) != 3 || s.YTicks[0].Label != "0.0" || s.YTicks[2].Label != "4.0" || s.YTicks[2].Y != f1(seriesTop) {
		t.Errorf("value axis %+v: want 0, 2 and 4, 4 at the top", s.YTicks)
	}
	lone := NewSeriesChart([]*float64{&two}, []string{"x"}, false, label, "")
	if len(lone.Dots) != 1 || len(lone.XTicks) != 1 || lone.XTicks[0].Label != "x" {
		t.Errorf("a series of one point: dots %+v, time axis %+v; want it drawn and labelled", lone.Dots, lone.XTicks)
	}
	bars := NewSeriesChart([]*float64{&two, &four}, []string{"a", "b"}, true, label, "")
	if len(bars.Bars) != 2 || bars.Bars[1].H != f1(seriesBottom-seriesTop) || bars.Bars[0].H != f1((seriesBottom-seriesTop)/2.0) {
		t.Errorf("bars %+v: want two, the larger full height", bars.Bars)
	}
}

// A trend of one bucket still draws its rates, as dots on labelled axes.
func TestTrendChartOfOnePoint(t *testing.T) {
	t.Parallel()
	half, ten := 0.5, 10.0
	c := NewTrendChart([]TrendPoint{{Label: "09:00", AsIs: &half, ReturnRate: &half, MedianChars: &ten}}, "")
	if len(c.AsIsDots) != 1 || len(c.ReturnDots) != 1 || len(c.Bars) != 1 {
		t.Errorf("one point: dots %+v %+v, bars %+v; want each drawn", c.AsIsDots, c.ReturnDots, c.Bars)
	}
	if len(c.YTicks) != 3 || c.YTicks[2].Label != "100%" || len(c.CharTicks) != 2 || c.CharTicks[1].Label != "10" {
		t.Errorf("axes %+v %+v: want 0-100%% on the left, 0-10 chars on the right", c.YTicks, c.CharTicks)
	}
}
