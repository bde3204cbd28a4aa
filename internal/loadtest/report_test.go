package loadtest

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"
)

func TestErrorLogCountsAllAndKeepsTheFirst(t *testing.T) {
	var l ErrorLog
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Go(func() { l.Add(fmt.Errorf("error %d", i)) })
	}
	wg.Wait()
	if l.Count() != 20 {
		t.Errorf("Count = %d, want 20", l.Count())
	}
	if n := len(l.Samples()); n != keptErrors {
		t.Errorf("kept %d messages, want %d", n, keptErrors)
	}

	var ordered ErrorLog
	for i := range 7 {
		ordered.Add(fmt.Errorf("error %d", i))
	}
	want := []string{"error 0", "error 1", "error 2", "error 3", "error 4"}
	if got := ordered.Samples(); !slices.Equal(got, want) {
		t.Errorf("Samples = %q, want %q", got, want)
	}
	ordered.Samples()[0] = "changed"
	if ordered.Samples()[0] != "error 0" {
		t.Error("changing what Samples returned changed the log")
	}
	var empty ErrorLog
	if empty.Count() != 0 || len(empty.Samples()) != 0 {
		t.Errorf("an empty log has %d errors, %q", empty.Count(), empty.Samples())
	}
}

func TestMedian(t *testing.T) {
	odd := []time.Duration{5, 1, 3}
	if got := Median(odd); got != 3 {
		t.Errorf("Median(%v) = %v, want 3", odd, got)
	}
	if !slices.Equal(odd, []time.Duration{5, 1, 3}) {
		t.Errorf("Median reordered its argument: %v", odd)
	}
	if got := Median([]time.Duration{4, 1, 2, 8}); got != 3 {
		t.Errorf("Median of 1,2,4,8 = %v, want 3 (the mean of 2 and 4)", got)
	}
	if got := Median([]time.Duration{1, 2}); got != 1 {
		t.Errorf("Median of 1,2 = %v, want 1 (integer mean, truncated)", got)
	}
	if got := Median([]float64{1, 2}); got != 1.5 {
		t.Errorf("Median of 1.0,2.0 = %v, want 1.5", got)
	}
	if got := Median([]int{7}); got != 7 {
		t.Errorf("Median of 7 = %v, want 7", got)
	}
	if got := Median[int](nil); got != 0 {
		t.Errorf("Median of nothing = %v, want 0", got)
	}
}

func TestMedianOf(t *testing.T) {
	type run struct{ rate float64 }
	runs := []run{{300}, {100}, {200}}
	if got := MedianOf(runs, func(r run) float64 { return r.rate }); got != 200 {
		t.Errorf("MedianOf rates = %v, want 200", got)
	}
}

func TestMillis(t *testing.T) {
	for d, want := range map[time.Duration]string{
		0: "0.00ms", 1234567 * time.Nanosecond: "1.23ms", 25 * time.Millisecond: "25.00ms", 1500 * time.Microsecond: "1.50ms",
	} {
		if got := Millis(d); got != want {
			t.Errorf("Millis(%v) = %q, want %q", d, got, want)
		}
	}
}

func TestVerdict(t *testing.T) {
	if Verdict(true) != "PASS" || Verdict(false) != "MISS" {
		t.Errorf("Verdict(true), Verdict(false) = %q, %q", Verdict(true), Verdict(false))
	}
}
