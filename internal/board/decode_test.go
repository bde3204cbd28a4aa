package board

import (
	"encoding/json"
	"os"
	"reflect"
	"testing"

	"github.com/handoffdesk/desk/internal/handoff"
)

// storedExample is a package as intake stores it: json.Marshal of the decoded example.
func storedExample(t testing.TB) []byte {
	t.Helper()
	raw, err := os.ReadFile("../handoff/testdata/harbor-v1.json")
	if err != nil {
		t.Fatal(err)
	}
	var p handoff.Package
	if err := json.Unmarshal(raw, &p); err != nil {
		t.Fatal(err)
	}
	stored, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	return stored
}

// decodeCard reads with encoding/json/v2: what it fills must be what encoding/json reads of the
// same fields, entities (which decode through their own UnmarshalJSON) included.
func TestDecodeCardReadsWhatEncodingJSONReads(t *testing.T) {
	stored := storedExample(t)
	var full handoff.Package
	if err := json.Unmarshal(stored, &full); err != nil {
		t.Fatal(err)
	}
	var card handoff.Package
	if err := decodeCard(stored, &card); err != nil {
		t.Fatal(err)
	}
	if len(full.StructuredEntities) == 0 || full.Contact == (handoff.Contact{}) || len(full.PrivacyFlags) == 0 {
		t.Fatalf("the example lacks fields a card shows: %+v", full)
	}
	want := handoff.Package{ProblemStatement: full.ProblemStatement, Contact: full.Contact, StructuredEntities: full.StructuredEntities,
		Sentiment: full.Sentiment, ChannelOrigin: full.ChannelOrigin, ChannelTarget: full.ChannelTarget, PrivacyFlags: full.PrivacyFlags}
	if !reflect.DeepEqual(card, want) {
		t.Fatalf("decodeCard read\n%+v\nwant\n%+v", card, want)
	}
}

// BenchmarkDecodeCard times decodeCard against encoding/json decoding the same fields (v1), the
// read it replaced.
func BenchmarkDecodeCard(b *testing.B) {
	stored := storedExample(b)
	b.Run("v1", func(b *testing.B) {
		for b.Loop() {
			var c cardFields
			if err := json.Unmarshal(stored, &c); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("decodeCard", func(b *testing.B) {
		for b.Loop() {
			var p handoff.Package
			if err := decodeCard(stored, &p); err != nil {
				b.Fatal(err)
			}
		}
	})
}
