// Package logtest records what code logs, for tests to wait for and read.
package logtest

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"
)

// Recorder is a slog.Handler that keeps every record at any level; safe for concurrent use.
type Recorder struct {
	mu      sync.Mutex
	records []slog.Record
	changed chan struct{} // closed and replaced on every record
}

// New returns an empty Recorder and a logger writing to it.
func New() (*Recorder, *slog.Logger) {
	r := &Recorder{changed: make(chan struct{})}
	return r, slog.New(r)
}

func (r *Recorder) Enabled(context.Context, slog.Level) bool { return true }

func (r *Recorder) Handle(_ context.Context, rec slog.Record) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.records = append(r.records, rec.Clone())
	close(r.changed)
	r.changed = make(chan struct{})
	return nil
}

// WithAttrs and WithGroup drop what they are given: tests match messages and the attributes of
// the call itself.
func (r *Recorder) WithAttrs([]slog.Attr) slog.Handler { return r }
func (r *Recorder) WithGroup(string) slog.Handler      { return r }

// Records returns what was logged so far, in order.
func (r *Recorder) Records() []slog.Record {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]slog.Record(nil), r.records...)
}

// Wait returns the first record match accepts, waiting for it up to a generous bound that only a
// broken program reaches; then it fails the test with what was logged.
func (r *Recorder) Wait(t testing.TB, what string, match func(slog.Record) bool) slog.Record {
	t.Helper()
	timeout := time.After(30 * time.Second)
	for seen := 0; ; {
		r.mu.Lock()
		records, changed := r.records, r.changed
		r.mu.Unlock()
		for ; seen < len(records); seen++ {
			if match(records[seen]) {
				return records[seen]
			}
		}
		select {
		case <-changed:
		case <-timeout:
			t.Fatalf("nothing logged %s; the log:\n%s", what, r)
		}
	}
}

// Attr returns the value of the record's attribute key, and whether it has one.
func Attr(rec slog.Record, key string) (slog.Value, bool) {
	var v slog.Value
	found := false
	rec.Attrs(func(a slog.Attr) bool {
		if a.Key == key {
			v, found = a.Value, true
			return false
		}
		return true
	})
	return v, found
}

// Message matches records with the message msg.
func Message(msg string) func(slog.Record) bool {
	return func(rec slog.Record) bool { return rec.Message == msg }
}

// String lists what was logged, one record a line.
func (r *Recorder) String() string {
	var b []byte
	for _, rec := range r.Records() {
		b = append(b, rec.Level.String()...)
		b = append(b, ' ')
		b = append(b, rec.Message...)
		rec.Attrs(func(a slog.Attr) bool {
			b = append(b, ' ')
			b = append(b, a.String()...)
			return true
		})
		b = append(b, '\n')
	}
	return string(b)
}
