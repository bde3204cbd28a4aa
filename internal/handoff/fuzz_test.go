package handoff

import (
	"encoding/json"
	"errors"
	"reflect"
	"testing"
)

// FuzzDecode checks that Decode never panics and always lands in one of three
// places: a *SyntaxError, a *ValidationError, or a valid package that
// survives encoding and decoding again unchanged. The seed corpus is the
// whole of testdata, so plain go test runs it.
func FuzzDecode(f *testing.F) {
	seeds := append(glob(f, "testdata/corpus/good/*.json"), glob(f, "testdata/corpus/bad/*.json")...)
	seeds = append(seeds, harborFile, harborGolden)
	for _, path := range seeds {
		f.Add(readFile(f, path))
	}
	for _, body := range []string{``, `{`, `{"a":1}x`, `[]`, `null`, `{"schema_version":"1.0","contact":null}`} {
		f.Add([]byte(body))
	}

	rules := QueueRules{RequiredEntityKeys: []string{"account_id"}}
	f.Fuzz(func(t *testing.T, body []byte) {
		p, err := Decode(body)
		if _, ok := errors.AsType[*SyntaxError](err); ok {
			return
		}
		if verr, ok := errors.AsType[*ValidationError](err); ok {
			if len(verr.Fields) == 0 {
				t.Fatal("ValidationError without fields")
			}
			for _, fe := range verr.Fields {
				if fe.Rule == "" || fe.Message == "" {
					t.Fatalf("incomplete field error %+v", fe)
				}
			}
			// What decoded of an invalid package must be safe to check further.
			if merged := MergeErrors(err, p.ValidateForQueue(rules)); merged == nil {
				t.Fatal("merging a ValidationError lost it")
			}
			return
		}
		if err != nil {
			t.Fatalf("Decode returned %T: %v", err, err)
		}

		again, err := json.Marshal(p)
		if err != nil {
			t.Fatalf("a valid package does not encode: %v", err)
		}
		p2, err := Decode(again)
		if err != nil {
			t.Fatalf("a valid package, encoded, does not decode: %v\n%s", err, again)
		}
		if !reflect.DeepEqual(p, p2) {
			t.Fatalf("round trip changed the package:\n before %+v\n after  %+v", p, p2)
		}
	})
}
