package loadtest

import (
	"fmt"
	"slices"
	"sync"
	"time"
)

// keptErrors is how many messages an ErrorLog keeps: a run that fails thousands of times mostly
// fails the same way, and its report needs the first few, not all.
const keptErrors = 5

// ErrorLog counts failed operations and keeps the first few messages. Workers share one, so it
// locks.
type ErrorLog struct {
	mu      sync.Mutex
	count   int
	samples []string
}

// Add counts err, and keeps its message while fewer than keptErrors are kept.
func (l *ErrorLog) Add(err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.count++
	if len(l.samples) < keptErrors {
		l.samples = append(l.samples, err.Error())
	}
}

// Count is how many errors were added.
func (l *ErrorLog) Count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.count
}

// Samples are the messages kept, the first ones added.
func (l *ErrorLog) Samples() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.samples)
}

// Median is the middle value, the mean of the middle two for an even count, 0 for none. values
// is not reordered.
func Median[T ~int | ~int64 | ~float64](values []T) T {
	if len(values) == 0 {
		return 0
	}
	v := slices.Clone(values)
	slices.Sort(v)
	mid := len(v) / 2
	if len(v)%2 == 0 {
		return (v[mid-1] + v[mid]) / 2
	}
	return v[mid]
}

// MedianOf is the Median of one figure over repeated runs: a run disturbed by the neighbours'
// load moves it less than it moves the mean.
func MedianOf[R any, T ~int | ~int64 | ~float64](runs []R, figure func(R) T) T {
	values := make([]T, len(runs))
	for i, r := range runs {
		values[i] = figure(r)
	}
	return Median(values)
}

// Millis shows a duration in milliseconds with two decimals, the unit of every latency in the
// reports.
func Millis(d time.Duration) string {
	return fmt.Sprintf("%.2fms", float64(d)/float64(time.Millisecond))
}

// Verdict shows whether a figure met its target. Targets are informational: a MISS does not fail
// a run.
func Verdict(ok bool) string {
	if ok {
		return "PASS"
	}
	return "MISS"
}
