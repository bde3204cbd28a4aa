package webhook_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/handoffdesk/desk/internal/metrics"
	"github.com/handoffdesk/desk/internal/webhook"
)

// deliveries reads handoffdesk_webhook_deliveries_total by outcome from the registry.
func deliveries(t *testing.T, m *metrics.Metrics) map[string]float64 {
	t.Helper()
	families, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, f := range families {
		if f.GetName() != "handoffdesk_webhook_deliveries_total" {
			continue
		}
		for _, s := range f.GetMetric() {
			got[s.GetLabel()[0].GetValue()] = s.GetCounter().GetValue()
		}
	}
	return got
}

func TestDeliveriesAreCountedByOutcome(t *testing.T) {
	t.Parallel()
	f := setup(t, func(n int, r *http.Request) int {
		switch {
		case r.Header.Get("X-Handoff-Event") == "resolved":
			return http.StatusGone
		case n == 1:
			return http.StatusInternalServerError
		}
		return http.StatusOK
	})
	counts := metrics.New(nil)
	d := f.deliverer(t, webhook.Options{Metrics: counts, BackoffBase: time.Second})

	f.enqueue(t, "h1", "accepted")
	deliverDue(t, d) // 500: pending, to be retried
	f.clock.Advance(time.Minute)
	deliverDue(t, d) // 200: delivered
	f.enqueue(t, "h2", "resolved")
	f.clock.Advance(time.Minute)
	deliverDue(t, d) // 410: dead at once

	got := deliveries(t, counts)
	want := map[string]float64{webhook.StatePending: 1, webhook.StateDelivered: 1, webhook.StateDead: 1}
	for outcome, n := range want {
		if got[outcome] != n {
			t.Errorf("deliveries{outcome=%s} = %v, want %v (all: %v)", outcome, got[outcome], n, got)
		}
	}
	if len(got) != len(want) {
		t.Errorf("deliveries by outcome = %v, want exactly %v", got, want)
	}
}
