package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"time"
)

// Every body gets its own handoff and contact id, written over these placeholders. The ids have a
// fixed width so that all bodies of one size are exactly the same length.
const (
	idDigits           = 12
	handoffPlaceholder = "ho_bench_000000000000"
	contactPlaceholder = "cust_bench_000000000000"
	queuePlaceholder   = "bench_0000" // queueName's width
	maxTranscriptTurns = 200          // the schema's cap
)

// template is a package body of one size with the offsets of its two ids.
type template struct {
	raw       []byte
	turns     int // transcript turns, the example's and the padding
	handoffAt int // offset of the handoff id's digits
	contactAt int // offset of the contact id's digits
}

// body returns a copy of the template whose ids end in n, so every request is a new package for a
// new contact and no per-contact guard ever refuses it.
func (t template) body(n uint64) []byte {
	b := bytes.Clone(t.raw)
	digits := fmt.Appendf(nil, "%0*d", idDigits, n)
	copy(b[t.handoffAt:], digits)
	copy(b[t.contactAt:], digits)
	return b
}

// inQueue returns the template addressed to the named queue instead, a name as long as
// queuePlaceholder so that the size and the id offsets stay.
func (t template) inQueue(name string) template {
	field := `"target_profile":"`
	t.raw = bytes.Replace(t.raw, []byte(field+queuePlaceholder+`"`), []byte(field+name+`"`), 1)
	return t
}

// Conversation lines the padding turns cycle through: the size of a package comes from its
// transcript in practice, so that is where the extra bytes go.
var (
	userLines = []string{
		"I checked my bank app again and both charges are still there, one at 9:14 and one at 9:15.",
		"Can you tell me which card was used? I have two on file and I am not sure which one you billed.",
		"I already tried the refund button in the app yesterday but it said the request could not be processed.",
		"This is the second time this has happened this year and honestly I am thinking about cancelling.",
		"My account number is the one ending in 9912, and the email on it is the same one I am writing from.",
		"How long does a reversal usually take to show up? I need the money back before my rent is due.",
	}
	assistantLines = []string{
		"Thanks for confirming. I can see both charges on the account, each for 49.99 on the Pro monthly plan.",
		"The card on file ending in 4417 was used for both. The other card has not been charged this month.",
		"I am sorry the in-app refund did not work. Refunds outside the automatic window need a person to approve them.",
		"I understand, and I have noted that this happened before so the specialist sees the full history.",
		"I have verified the account and the email address. Nothing else is needed from you for verification.",
		"Reversals usually appear within 3 to 5 business days, depending on your bank.",
	}
)

// newTemplate reads the example package, points it at queuePlaceholder, sends it in the transfer
// mode given ("cold" or "warm", the same length, so both modes' bodies are alike to the byte but
// for it) and pads its transcript with turns, inserted before the bot's closing message, until the
// body is exactly size bytes.
func newTemplate(examplePath string, size int, mode string) (template, error) {
	raw, err := os.ReadFile(examplePath) //nolint:gosec // G304: the path is the operator's own -example flag.
	if err != nil {
		return template{}, err
	}
	var pkg map[string]any
	if err := json.Unmarshal(raw, &pkg); err != nil {
		return template{}, fmt.Errorf("%s: %w", examplePath, err)
	}
	pkg["handoff_id"] = handoffPlaceholder
	pkg["target_profile"] = queuePlaceholder
	pkg["transfer_mode"] = mode
	contact, ok := pkg["contact"].(map[string]any)
	transcript, ok2 := pkg["transcript"].([]any)
	if !ok || !ok2 || len(transcript) == 0 {
		return template{}, fmt.Errorf("%s: want a package with a contact and a transcript", examplePath)
	}
	contact["id"] = contactPlaceholder
	opening, closing := transcript[:len(transcript)-1], transcript[len(transcript)-1]

	withPadding := func(padding []any) ([]byte, error) {
		turns := append(append(append([]any{}, opening...), padding...), closing)
		pkg["transcript"] = turns
		return json.Marshal(pkg)
	}
	start := time.Date(2026, 6, 2, 14, 3, 20, 0, time.UTC)
	var padding []any
	body, err := withPadding(nil)
	if err != nil {
		return template{}, err
	}
	for {
		i := len(padding)
		role, lines := "user", userLines
		if i%2 == 1 {
			role, lines = "assistant", assistantLines
		}
		next := map[string]any{"role": role, "content": lines[(i/2)%len(lines)], "at": start.Add(time.Duration(i) * 20 * time.Second).Format(time.RFC3339)}
		longer, err := withPadding(append(padding, next))
		if err != nil {
			return template{}, err
		}
		if len(longer) > size {
			break
		}
		padding, body = append(padding, next), longer
	}
	if len(padding) == 0 {
		return template{}, fmt.Errorf("size %d leaves no room for a transcript turn: the example alone is %d bytes", size, len(body))
	}
	// The gap left is shorter than a turn: lengthen the last turn by exactly that many characters
	// (the lines are ASCII with nothing JSON escapes, so a character is a byte).
	last := padding[len(padding)-1].(map[string]any)
	filler := strings.Repeat(" "+assistantLines[0], 1+(size-len(body))/len(assistantLines[0]))
	last["content"] = last["content"].(string) + filler[:size-len(body)]
	if body, err = withPadding(padding); err != nil {
		return template{}, err
	}
	turns := len(opening) + len(padding) + 1
	if len(body) != size || turns > maxTranscriptTurns {
		return template{}, fmt.Errorf("size %d: built a %d-byte body with %d turns (the schema allows %d)", size, len(body), turns, maxTranscriptTurns)
	}
	t := template{raw: body, turns: turns}
	t.handoffAt = bytes.Index(body, []byte(handoffPlaceholder)) + len(handoffPlaceholder) - idDigits
	t.contactAt = bytes.Index(body, []byte(contactPlaceholder)) + len(contactPlaceholder) - idDigits
	return t, nil
}
