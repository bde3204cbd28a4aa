package server

import (
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/handoffdesk/desk/internal/events"
)

// The webhooks documented are the webhooks sent: every kind a bot hears of is in the spec's
// EventName, and nothing else is.
func TestOpenAPIListsTheWebhooksSent(t *testing.T) {
	t.Parallel()
	m := regexp.MustCompile(`(?s)\n    EventName:.*?\n      enum: \[([^\]]*)\]`).FindSubmatch(openAPI)
	if m == nil {
		t.Fatal("openapi.yaml has no EventName enum")
	}
	documented := strings.Split(string(m[1]), ", ")
	var sent []string
	for _, k := range events.Kinds() {
		if k.TellsBot() {
			sent = append(sent, string(k))
		}
	}
	slices.Sort(documented)
	slices.Sort(sent)
	if !slices.Equal(documented, sent) {
		t.Errorf("openapi.yaml documents the webhooks %v; the desk sends %v", documented, sent)
	}
}
