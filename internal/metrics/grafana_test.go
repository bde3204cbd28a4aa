package metrics_test

import (
	"encoding/json"
	"os"
	"regexp"
	"strings"
	"testing"
)

// docs/grafana-dashboard.json is valid JSON and charts every series docs/metrics.md defines.
func TestGrafanaDashboardChartsEveryDocumentedSeries(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile("../../docs/grafana-dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Title   string
			Targets []struct{ Expr string }
		}
	}
	if err := json.Unmarshal(raw, &dash); err != nil {
		t.Fatalf("grafana-dashboard.json: %v", err)
	}
	var exprs strings.Builder
	for _, p := range dash.Panels {
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			exprs.WriteString(tg.Expr + "\n")
		}
	}
	doc, err := os.ReadFile("../../docs/metrics.md")
	if err != nil {
		t.Fatal(err)
	}
	names := regexp.MustCompile("`(handoffdesk_[a-z_]+)`").FindAllStringSubmatch(string(doc), -1)
	if len(names) < 10 {
		t.Fatalf("docs/metrics.md names %d series; the table seems gone", len(names))
	}
	for _, n := range names {
		if !strings.Contains(exprs.String(), n[1]) {
			t.Errorf("no panel charts %s", n[1])
		}
	}
}
