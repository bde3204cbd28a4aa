package views

import (
	"fmt"
	"strconv"
	"strings"
)

// TrendPoint is one bucket of a source agent's chart; a nil value had nothing to measure.
type TrendPoint struct {
	Label                         string
	AsIs, ReturnRate, MedianChars *float64
}

// TrendChart is an SVG line chart drawn on the server: the share of drafts sent as is and the
// return-to-bot rate as lines on a 0–100 % scale, the median edit distance as bars on a scale of
// its own. No script draws it, so it prints, scales and reads the same everywhere.
type TrendChart struct {
	Width, Height            int
	Left, Right, Top, Bottom int
	AsIsPath, ReturnPath     string
	Bars                     []ChartBar
	MaxChars                 string
	Ticks                    []ChartTick
	Summary                  string
}

// ChartBar is one bucket's median edit distance.
type ChartBar struct{ X, Y, W, H string }

// ChartTick labels a bucket on the time axis.
type ChartTick struct{ X, Label string }

const (
	chartWidth, chartHeight         = 640, 180
	chartLeft, chartRight, chartTop = 36, 604, 10
	chartBottom                     = 150
	chartTicks                      = 6
)

// NewTrendChart lays the points out left to right, oldest first. A line breaks over buckets
// without a value rather than drawing through them.
func NewTrendChart(points []TrendPoint, summary string) TrendChart {
	c := TrendChart{Width: chartWidth, Height: chartHeight, Left: chartLeft, Right: chartRight, Top: chartTop, Bottom: chartBottom, Summary: summary}
	if len(points) == 0 {
		return c
	}
	step := float64(chartRight-chartLeft) / float64(len(points))
	x := func(i int) float64 { return chartLeft + step*(float64(i)+0.5) }
	y := func(share float64) float64 { return chartBottom - share*(chartBottom-chartTop) }
	line := func(value func(TrendPoint) *float64) string {
		var b strings.Builder
		pen := false
		for i, p := range points {
			v := value(p)
			if v == nil {
				pen = false
				continue
			}
			cmd := "L"
			if !pen {
				cmd = "M"
			}
			fmt.Fprintf(&b, "%s%.1f %.1f ", cmd, x(i), y(*v))
			pen = true
		}
		return strings.TrimSpace(b.String())
	}
	c.AsIsPath = line(func(p TrendPoint) *float64 { return p.AsIs })
	c.ReturnPath = line(func(p TrendPoint) *float64 { return p.ReturnRate })
	var most float64
	for _, p := range points {
		if p.MedianChars != nil {
			most = max(most, *p.MedianChars)
		}
	}
	if most > 0 {
		c.MaxChars = strconv.FormatFloat(most, 'f', 0, 64)
		for i, p := range points {
			if p.MedianChars == nil {
				continue
			}
			h := *p.MedianChars / most * (chartBottom - chartTop)
			c.Bars = append(c.Bars, ChartBar{X: f1(x(i) - step*0.35), Y: f1(chartBottom - h), W: f1(step * 0.7), H: f1(h)})
		}
	}
	every := max(1, len(points)/chartTicks)
	for i := 0; i < len(points); i += every {
		c.Ticks = append(c.Ticks, ChartTick{X: f1(x(i)), Label: points[i].Label})
	}
	return c
}

func f1(v float64) string { return strconv.FormatFloat(v, 'f', 1, 64) }

// Sparkline is a small SVG line of one figure over the window's buckets, with the same figures as
// text beside it (Summary) for readers that do not see the line.
type Sparkline struct {
	Width, Height int
	Path          string
	// Dots mark buckets with a value that no neighbour joins: a line needs two points.
	Dots    []ChartDot
	Summary string
}

// ChartDot is a lone point of a sparkline.
type ChartDot struct{ X, Y string }

const sparkWidth, sparkHeight, sparkPad = 240, 40, 3

// NewSparkline scales the values from zero to their largest; a nil value breaks the line.
func NewSparkline(values []*float64, summary string) Sparkline {
	s := Sparkline{Width: sparkWidth, Height: sparkHeight, Summary: summary}
	var most float64
	for _, v := range values {
		if v != nil {
			most = max(most, *v)
		}
	}
	if len(values) == 0 {
		return s
	}
	step := float64(sparkWidth-2*sparkPad) / float64(max(1, len(values)-1))
	x := func(i int) float64 { return sparkPad + step*float64(i) }
	y := func(v float64) float64 {
		if most == 0 {
			return sparkHeight - sparkPad
		}
		return sparkHeight - sparkPad - v/most*(sparkHeight-2*sparkPad)
	}
	has := func(i int) bool { return i >= 0 && i < len(values) && values[i] != nil }
	var b strings.Builder
	for i, v := range values {
		if v == nil {
			continue
		}
		if !has(i-1) && !has(i+1) {
			s.Dots = append(s.Dots, ChartDot{X: f1(x(i)), Y: f1(y(*v))})
			continue
		}
		cmd := "L"
		if !has(i - 1) {
			cmd = "M"
		}
		fmt.Fprintf(&b, "%s%.1f %.1f ", cmd, x(i), y(*v))
	}
	s.Path = strings.TrimSpace(b.String())
	return s
}

// Bar is one queue's bar: its length as a share of the longest, and its figure as text.
type Bar struct {
	Label, Value, Note string
	Width              string // percent of the track
}

// NewBars scales each value against the largest.
func NewBars(labels []string, values []int, notes []string) []Bar {
	most := 0
	for _, v := range values {
		most = max(most, v)
	}
	bars := make([]Bar, len(labels))
	for i, l := range labels {
		w := 0.0
		if most > 0 {
			w = float64(values[i]) / float64(most) * 100
		}
		bars[i] = Bar{Label: l, Value: strconv.Itoa(values[i]), Note: notes[i], Width: f1(w)}
	}
	return bars
}
