package handoff

import (
	"encoding/json"
	"testing"
)

func TestEntityValueRoundTrip(t *testing.T) {
	for _, tt := range []struct {
		json string
		want EntityValue
	}{
		{`"acct_9912"`, StringEntity("acct_9912")},
		{`""`, StringEntity("")},
		{`12345678901234567890123`, NumberEntity("12345678901234567890123")},
		{`-1.5e3`, NumberEntity("-1.5e3")},
		{`true`, BoolEntity(true)},
		{`["ch_44b","ch_44c"]`, listEntity("ch_44b", "ch_44c")},
		{`[]`, listEntity()},
	} {
		var got EntityValue
		if err := json.Unmarshal([]byte(tt.json), &got); err != nil {
			t.Errorf("Unmarshal(%s): %v", tt.json, err)
			continue
		}
		if got.Kind() != tt.want.Kind() || string(encode(t, got)) != string(encode(t, tt.want)) {
			t.Errorf("Unmarshal(%s) = %#v, want %#v", tt.json, got, tt.want)
		}
		if out := string(encode(t, got)); out != tt.json {
			t.Errorf("Marshal(Unmarshal(%s)) = %s", tt.json, out)
		}
	}
}

func TestEntityValueRejects(t *testing.T) {
	for _, input := range []string{`{}`, `{"id":1}`, `null`, `["a",1]`, `["a",null]`, `[["a"]]`, `[{}]`} {
		var v EntityValue
		if err := json.Unmarshal([]byte(input), &v); err == nil {
			t.Errorf("Unmarshal(%s) accepted %#v", input, v)
		}
	}
	if _, err := json.Marshal(EntityValue{}); err == nil {
		t.Error("the zero EntityValue encoded")
	}
}

func TestEntityValueAccessors(t *testing.T) {
	list := listEntity("a", "b")
	list.List()[0] = "changed"
	if list.List()[0] != "a" {
		t.Error("List exposes the value's own slice")
	}
	n := NumberEntity("42")
	if n.Number() != "42" || n.Text() != "" || n.Bool() || n.List() != nil {
		t.Errorf("number accessors: %q %q %v %v", n.Number(), n.Text(), n.Bool(), n.List())
	}
	if s := StringEntity("x"); s.Text() != "x" || s.Number() != "" {
		t.Errorf("string accessors: %q %q", s.Text(), s.Number())
	}
	if !BoolEntity(true).Bool() {
		t.Error("BoolEntity(true).Bool() = false")
	}
}

// listEntity builds a list entity value, which outside tests only decoding makes.
func listEntity(items ...string) EntityValue {
	return EntityValue{kind: EntityList, list: items}
}
