// Package promqlcheck reads docs/grafana-dashboard.json's queries with Prometheus's own PromQL
// parser: each must parse, read only series the desk's registry has, and be charted in a unit
// that fits what it computes.
package promqlcheck

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/prometheus/promql/parser"

	"github.com/handoffdesk/desk/internal/metrics/metricstest"
)

type panel struct {
	ID          int
	Title       string
	FieldConfig struct {
		Defaults  struct{ Unit string }
		Overrides []struct {
			Matcher    struct{ ID, Options string }
			Properties []struct {
				ID    string
				Value any
			}
		}
	}
	Targets []struct {
		RefID string
		Expr  string
	}
}

// unitOf is the unit a panel charts its query refID in: an override by the query, else the
// panel's default.
func (p panel) unitOf(refID string) string {
	for _, o := range p.FieldConfig.Overrides {
		if o.Matcher.ID != "byFrameRefID" || o.Matcher.Options != refID {
			continue
		}
		for _, prop := range o.Properties {
			if unit, ok := prop.Value.(string); ok && prop.ID == "unit" {
				return unit
			}
		}
	}
	return p.FieldConfig.Defaults.Unit
}

// unitSeconds is the power of seconds of Grafana's units the dashboard may use: 1 for a duration,
// -1 for a rate per second, 0 for a plain number.
var unitSeconds = map[string]int{
	"s": 1, "ms": 1,
	"reqps": -1, "ops": -1, "cps": -1, "wps": -1, "rps": -1,
	"short": 0, "none": 0, "percentunit": 0,
}

// grafanaVariables are the interval variables Grafana fills in before Prometheus sees a query.
var grafanaVariables = strings.NewReplacer("$__rate_interval", "5m", "$__interval", "1m", "$__range", "6h")

func TestDashboardQueriesParseReadRealSeriesInFittingUnits(t *testing.T) {
	raw, err := os.ReadFile("../../docs/grafana-dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash struct{ Panels []panel }
	if err := json.Unmarshal(raw, &dash); err != nil {
		t.Fatal(err)
	}
	families := registryFamilies(t)
	promql := parser.NewParser(parser.Options{})
	queries := 0
	for _, p := range dash.Panels {
		for _, target := range p.Targets {
			queries++
			what := fmt.Sprintf("panel %d (%s), query %s", p.ID, p.Title, target.RefID)
			query := grafanaVariables.Replace(target.Expr)
			if strings.Contains(query, "$") {
				t.Errorf("%s: %q uses a Grafana variable this check does not know", what, target.Expr)
				continue
			}
			expr, err := promql.ParseExpr(query)
			if err != nil {
				t.Errorf("%s: %q does not parse: %v", what, target.Expr, err)
				continue
			}
			parser.Inspect(expr, func(node parser.Node, _ []parser.Node) error {
				if vs, ok := node.(*parser.VectorSelector); ok && !families.has(vs.Name) {
					t.Errorf("%s reads %s, which the desk's registry does not have", what, vs.Name)
				}
				return nil
			})
			got, err := seconds(expr)
			if err != nil {
				t.Errorf("%s: %v", what, err)
				continue
			}
			unit := p.unitOf(target.RefID)
			if want, known := unitSeconds[unit]; !known {
				t.Errorf("%s is charted in unit %q, which this check does not know", what, unit)
			} else if got != want {
				t.Errorf("%s: %q computes seconds^%d, charted in %q (seconds^%d)", what, target.Expr, got, unit, want)
			}
		}
	}
	if queries < 10 {
		t.Fatalf("the dashboard has %d queries; its panels seem gone", queries)
	}
}

// seconds is the power of seconds of what expr computes, from the names of the series it reads
// (Prometheus's base units: _seconds is a duration, anything else a count) and what each function
// and operator does to them: rate() divides by seconds, histogram_quantile() answers in the unit
// of the histogram's buckets.
func seconds(expr parser.Expr) (int, error) {
	switch e := expr.(type) {
	case *parser.NumberLiteral:
		return 0, nil
	case *parser.ParenExpr:
		return seconds(e.Expr)
	case *parser.StepInvariantExpr:
		return seconds(e.Expr)
	case *parser.UnaryExpr:
		return seconds(e.Expr)
	case *parser.MatrixSelector:
		return seconds(e.VectorSelector)
	case *parser.VectorSelector:
		name := e.Name
		if strings.HasSuffix(name, "_count") {
			return 0, nil
		}
		for _, suffix := range []string{"_total", "_sum", "_bucket"} {
			name = strings.TrimSuffix(name, suffix)
		}
		if strings.HasSuffix(name, "_seconds") {
			return 1, nil
		}
		return 0, nil
	case *parser.AggregateExpr:
		if e.Op == parser.COUNT {
			return 0, nil
		}
		return seconds(e.Expr)
	case *parser.Call:
		switch e.Func.Name {
		case "rate", "irate":
			s, err := seconds(e.Args[0])
			return s - 1, err
		case "increase", "delta", "idelta":
			return seconds(e.Args[0])
		case "histogram_quantile":
			var buckets *parser.VectorSelector
			parser.Inspect(e.Args[1], func(node parser.Node, _ []parser.Node) error {
				if vs, ok := node.(*parser.VectorSelector); ok && buckets == nil {
					buckets = vs
				}
				return nil
			})
			if buckets == nil {
				return 0, fmt.Errorf("%s reads no buckets", e)
			}
			return seconds(buckets)
		}
		return 0, fmt.Errorf("%s: this check does not know what %s() does to units", e, e.Func.Name)
	case *parser.BinaryExpr:
		lhs, err := seconds(e.LHS)
		if err != nil {
			return 0, err
		}
		rhs, err := seconds(e.RHS)
		if err != nil {
			return 0, err
		}
		switch e.Op {
		case parser.MUL:
			return lhs + rhs, nil
		case parser.DIV:
			return lhs - rhs, nil
		case parser.ADD, parser.SUB:
			if lhs != rhs {
				return 0, fmt.Errorf("%s adds seconds^%d and seconds^%d", e, lhs, rhs)
			}
		}
		return lhs, nil
	}
	return 0, fmt.Errorf("%s: this check does not know the units of a %T", expr, expr)
}

// familyNames are the metric families a registry gathers, by name and kind.
type familyNames map[string]dto.MetricType

// has says whether a selector's name is one of the families, or one of a histogram's series.
func (f familyNames) has(name string) bool {
	if _, ok := f[name]; ok {
		return true
	}
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		if base, cut := strings.CutSuffix(name, suffix); cut && f[base] == dto.MetricType_HISTOGRAM {
			return true
		}
	}
	return false
}

// registryFamilies are the families of a desk instance's registry with a series in each.
func registryFamilies(t *testing.T) familyNames {
	t.Helper()
	gathered, err := metricstest.EverySeries(t).Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	names := familyNames{}
	for _, f := range gathered {
		names[f.GetName()] = f.GetType()
	}
	return names
}
