// Package handofftest gives tests of the packages that store and work handoff packages the spec's
// example package, the Harbor billing escalation, decoded.
package handofftest

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/handoffdesk/desk/internal/handoff"
)

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
