package metrics_test

import (
	"encoding/json"
	"fmt"
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

// Every data source the dashboard's panels and queries name is one its import can resolve: a
// data source variable of its own or one of its __inputs, which Grafana's import asks for; and
// every input is used, or the import asks for a data source that nothing reads.
func TestGrafanaDashboardDataSourcesResolve(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile("../../docs/grafana-dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	type dataSource struct{ Type, UID string }
	var dash struct {
		Inputs []struct {
			Name, Type string
		} `json:"__inputs"`
		Templating struct {
			List []struct {
				Name, Type string
			}
		}
		Panels []struct {
			ID         int
			DataSource *dataSource
			Targets    []struct {
				RefID      string
				DataSource *dataSource
			}
		}
	}
	if err := json.Unmarshal(raw, &dash); err != nil {
		t.Fatalf("grafana-dashboard.json: %v", err)
	}
	known := map[string]bool{}
	for _, v := range dash.Templating.List {
		if v.Type == "datasource" {
			known["${"+v.Name+"}"] = true
		}
	}
	for _, in := range dash.Inputs {
		if in.Type == "datasource" {
			known["${"+in.Name+"}"] = true
			if !strings.Contains(strings.ReplaceAll(string(raw), `"name": "`+in.Name+`"`, ""), "${"+in.Name+"}") {
				t.Errorf("__inputs declares %s, which no panel uses: the import would ask for a data source nothing reads", in.Name)
			}
		}
	}
	check := func(what string, ds *dataSource) {
		switch {
		case ds == nil:
			t.Errorf("%s names no data source", what)
		case ds.Type != "prometheus":
			t.Errorf("%s reads a %q data source, want prometheus", what, ds.Type)
		case strings.HasPrefix(ds.UID, "$") && !known[ds.UID]:
			t.Errorf("%s reads data source %s, which is neither a data source variable nor an input", what, ds.UID)
		case !strings.HasPrefix(ds.UID, "$"):
			t.Errorf("%s reads data source %q, which exists only in the Grafana it was exported from", what, ds.UID)
		}
	}
	for _, p := range dash.Panels {
		check(fmt.Sprintf("panel %d", p.ID), p.DataSource)
		for _, tg := range p.Targets {
			check(fmt.Sprintf("panel %d's query %s", p.ID, tg.RefID), tg.DataSource)
		}
	}
}
