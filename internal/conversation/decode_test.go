package conversation

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/handoffdesk/desk/internal/handoff"
)

// Every bad field of a message is named at once, each with its rule, as a package's are.
func TestDecodeNamesEveryBadField(t *testing.T) {
	body := `{"message_id":"bad id!","role":"agent","text":"","draft_reply":"x",
		"attachments":[{"url":"http://example.com/a.pdf","size":-1},{"name":"no url"}],"colour":"red"}`
	_, err := Decode([]byte(body))
	var invalid *handoff.ValidationError
	if !errors.As(err, &invalid) {
		t.Fatalf("Decode: %v, want a *handoff.ValidationError", err)
	}
	var got []string
	for _, f := range invalid.Fields {
		got = append(got, f.Field+":"+f.Rule)
		if !strings.HasPrefix(f.Message, f.Field) && f.Field != "" {
			t.Errorf("message %q does not name its field %q", f.Message, f.Field)
		}
	}
	for _, want := range []string{"message_id:handoff_id", "role:oneof", "text:required", "attachments[0].url:https",
		"attachments[0].size:min", "attachments[1].url:required", "colour:unknown_field"} {
		if !slices.Contains(got, want) {
			t.Errorf("fields %v lack %s", got, want)
		}
	}
}

func TestDecodeRefusesDraftOnTheBotsOwnMessage(t *testing.T) {
	_, err := Decode([]byte(`{"message_id":"m1","role":"assistant","text":"one moment","draft_reply":"x"}`))
	var invalid *handoff.ValidationError
	if !errors.As(err, &invalid) || invalid.Fields[0].Field != "draft_reply" {
		t.Fatalf("Decode: %v, want draft_reply refused", err)
	}
}

func TestDecodeKeepsEveryRuneOfTheText(t *testing.T) {
	text := strings.Repeat("é", MaxTextChars)
	m, err := Decode([]byte(`{"message_id":"m1","role":"user","text":"` + text + `","at":"2026-12-07T10:00:00+01:00"}`))
	if err != nil {
		t.Fatalf("Decode of %d runes: %v", MaxTextChars, err)
	}
	if m.Text != text || m.At.Location().String() != "UTC" || m.At.Hour() != 9 {
		t.Fatalf("decoded %d runes at %v", len([]rune(m.Text)), m.At)
	}
	if _, err := Decode([]byte(`{"message_id":"m1","role":"user","text":"` + text + `é"}`)); err == nil {
		t.Fatal("a text one rune over the limit was taken")
	}
}

// A replay is the same body whatever the order of its members; a changed text is another body.
func TestDigestIsTheBodyNotItsSpelling(t *testing.T) {
	a, _ := Decode([]byte(`{"message_id":"m1","role":"user","text":"hi","draft_reply":"hello"}`))
	b, _ := Decode([]byte(`{"draft_reply":"hello","text":"hi","role":"user","message_id":"m1"}`))
	c, _ := Decode([]byte(`{"message_id":"m1","role":"user","text":"hi!","draft_reply":"hello"}`))
	if string(a.digest()) != string(b.digest()) || string(a.digest()) == string(c.digest()) {
		t.Fatal("digests do not tell bodies apart by content")
	}
}
