// Package handofftest gives tests of the packages that store and work handoff packages the spec's
// example package, the Harbor billing escalation, decoded.
package handofftest

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sync/atomic"
	"testing"

	"github.com/handoffdesk/desk/internal/handoff"
)

// Numbered is a source of Harbor packages, each with an id and a contact of its own.
type Numbered struct{ n atomic.Int64 }

// Next is the Harbor package for the next contact, bound for queueName.
func (src *Numbered) Next(t testing.TB, queueName string) handoff.Package {
	t.Helper()
	p := Harbor(t)
	n := src.n.Add(1)
	p.HandoffID, p.Contact.ID, p.TargetProfile = fmt.Sprintf("ho_%d", n), fmt.Sprintf("cust_%d", n), queueName
	return p
}

// Harbor is the Harbor package (internal/handoff/testdata/harbor-v1.json), decoded.
func Harbor(t testing.TB) handoff.Package {
	t.Helper()
	_, here, _, _ := runtime.Caller(0)
	raw, err := os.ReadFile(filepath.Join(filepath.Dir(here), "..", "testdata", "harbor-v1.json"))
	if err != nil {
		t.Fatal(err)
	}
	p, err := handoff.Decode(raw)
	if err != nil {
		t.Fatal(err)
	}
	return p
}
