package views

import (
	"fmt"
	"strconv"
	"strings"
)

// The charts are SVG drawn on the server: no script draws them, so they print, scale and read the
// same everywhere, and each is paired with a table of its values for those who do not see it.
// Every chart has its axes labelled with values, and every point with a value is drawn as a dot,
// so that a series of one point shows.

// TrendPoint is one bucket of a source agent's chart; a nil value had nothing to measure.
type TrendPoint struct {
	Label                         string
	AsIs, ReturnRate, MedianChars *float64
}

// TrendChart is an SVG line chart: the share of drafts sent as is and the return-to-bot rate as
// lines on a 0–100 % scale (left axis), the median edit distance as bars on a scale of its own
// (right axis, in characters).
type TrendChart struct {
	Width, Height            int
	Left, Right, Top, Bottom int
	AsIsPath, ReturnPath     string
	AsIsDots, ReturnDots     []ChartDot
	Bars                     []ChartBar
	MaxChars                 string
	// YTicks are the left axis' values (0%, 50%, 100%), CharTicks the right axis' (0 and the
	// largest median); XTicks label buckets on the time axis.
	YTicks, CharTicks, XTicks []ChartTick
	Summary                   string
}

// ChartBar is one bucket's bar.
type ChartBar struct{ X, Y, W, H string }

// ChartTick is a labelled value on an axis, at X (time axis) or Y (value axes).
type ChartTick struct{ X, Y, Label string }

// ChartDot is a point of a line.
type ChartDot struct{ X, Y string }

const (
	chartWidth, chartHeight         = 640, 180
	chartLeft, chartRight, chartTop = 40, 596, 10
	chartBottom                     = 150
	chartTicks                      = 6
)

// NewTrendChart lays the points out left to right, oldest first. A line breaks over buckets
// without a value rather than drawing through them.
func NewTrendChart(points []TrendPoint, summary string) TrendChart {
	c := TrendChart{Width: chartWidth, Height: chartHeight, Left: chartLeft, Right: chartRight, Top: chartTop, Bottom: chartBottom, Summary: summary}
	for _, share := range []float64{0, 0.5, 1} {
		c.YTicks = append(c.YTicks, ChartTick{Y: f1(chartBottom - share*(chartBottom-chartTop)), Label: strconv.Itoa(int(share*100)) + "%"})
	}
	if len(points) == 0 {
		return c
	}
	step := float64(chartRight-chartLeft) / float64(len(points))
	x := func(i float64) float64 { return chartLeft + step*(i+0.5) }
	y := func(share float64) float64 { return chartBottom - share*(chartBottom-chartTop) }
	values := func(value func(TrendPoint) *float64) []*float64 {
		vs := make([]*float64, len(points))
		for i, p := range points {
			vs[i] = value(p)
		}
		return vs
	}
	c.AsIsPath, c.AsIsDots = line(values(func(p TrendPoint) *float64 { return p.AsIs }), x, y)
	c.ReturnPath, c.ReturnDots = line(values(func(p TrendPoint) *float64 { return p.ReturnRate }), x, y)
	var most float64
	for _, p := range points {
		if p.MedianChars != nil {
			most = max(most, *p.MedianChars)
		}
	}
	if most > 0 {
		c.MaxChars = strconv.FormatFloat(most, 'f', 0, 64)
		c.CharTicks = []ChartTick{{Y: f1(chartBottom), Label: "0"}, {Y: f1(chartTop), Label: c.MaxChars}}
		for i, p := range points {
			if p.MedianChars == nil {
				continue
			}
			h := *p.MedianChars / most * (chartBottom - chartTop)
			c.Bars = append(c.Bars, ChartBar{X: f1(x(float64(i)) - step*0.35), Y: f1(chartBottom - h), W: f1(step * 0.7), H: f1(h)})
		}
	}
	every := max(1, len(points)/chartTicks)
	for i := 0; i < len(points); i += every {
		c.XTicks = append(c.XTicks, ChartTick{X: f1(x(float64(i))), Label: points[i].Label})
	}
	return c
}

// line draws values as a path, breaking over nil values, with a dot at every value.
func line(values []*float64, x, y func(float64) float64) (string, []ChartDot) {
	var b strings.Builder
	var dots []ChartDot
	pen := false
	for i, v := range values {
		if v == nil {
			pen = false
			continue
		}
		cmd := "L"
		if !pen {
			cmd = "M"
		}
		fmt.Fprintf(&b, "%s%.1f %.1f ", cmd, x(float64(i)), y(*v))
		dots = append(dots, ChartDot{X: f1(x(float64(i))), Y: f1(y(*v))})
		pen = true
	}
	return strings.TrimSpace(b.String()), dots
}

func f1(v float64) string { return strconv.FormatFloat(v, 'f', 1, 64) }

// SeriesChart is one figure over the window's buckets: bars (a count per bucket) or a line (a
// median per bucket), with a value axis from 0 to the largest value and the buckets' times below.
type SeriesChart struct {
	Width, Height            int
	Left, Right, Top, Bottom int
	Bars                     []ChartBar
	Path                     string
	Dots                     []ChartDot
	YTicks, XTicks           []ChartTick
	Summary                  string
}

const (
	seriesWidth, seriesHeight          = 480, 150
	seriesLeft, seriesRight, seriesTop = 48, 472, 8
	seriesBottom                       = 122
	seriesXTicks                       = 4
)

// NewSeriesChart lays out values (nil: nothing to measure in that bucket) over the buckets
// labelled by labels, as bars or as a line; value prints a value of the axis.
func NewSeriesChart(values []*float64, labels []string, bars bool, value func(float64) string, summary string) SeriesChart {
	c := SeriesChart{Width: seriesWidth, Height: seriesHeight, Left: seriesLeft, Right: seriesRight, Top: seriesTop, Bottom: seriesBottom,
		Summary: summary}
	var most float64
	for _, v := range values {
		if v != nil {
			most = max(most, *v)
		}
	}
	top := most
	if top == 0 {
		top = 1
	}
	y := func(v float64) float64 { return seriesBottom - v/top*(seriesBottom-seriesTop) }
	for _, v := range []float64{0, top / 2, top} {
		c.YTicks = append(c.YTicks, ChartTick{Y: f1(y(v)), Label: value(v)})
	}
	if len(values) == 0 {
		return c
	}
	step := float64(seriesRight-seriesLeft) / float64(len(values))
	x := func(i float64) float64 { return seriesLeft + step*(i+0.5) }
	if bars {
		for i, v := range values {
			if v == nil {
				continue
			}
			c.Bars = append(c.Bars, ChartBar{X: f1(x(float64(i)) - step*0.4), Y: f1(y(*v)), W: f1(step * 0.8), H: f1(seriesBottom - y(*v))})
		}
	} else {
		c.Path, c.Dots = line(values, x, y)
	}
	every := max(1, (len(values)+seriesXTicks-1)/seriesXTicks)
	for i := 0; i < len(values); i += every {
		c.XTicks = append(c.XTicks, ChartTick{X: f1(x(float64(i))), Label: labels[i]})
	}
	return c
}
