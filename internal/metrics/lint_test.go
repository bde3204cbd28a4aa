package metrics_test

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/handoffdesk/desk/internal/metrics/metricstest"
)

// The registry follows Prometheus's naming and exposition rules as promtool checks them
// (client_golang's promlint: units, _total on counters, help on every family).
func TestRegistryPassesPromlint(t *testing.T) {
	t.Parallel()
	m := metricstest.EverySeries(t)
	problems, err := testutil.GatherAndLint(m.Registry())
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("%s: %s", p.Metric, p.Text)
	}
	families, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	if len(families) < 20 {
		t.Errorf("the registry gathers %d families; the lint saw too few to mean much", len(families))
	}
}
