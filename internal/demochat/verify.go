package demochat

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Tolerance is how far a delivery's timestamp may be from the bot's clock, the Standard Webhooks
// libraries' default: a delivery captured on its way cannot be replayed later.
const Tolerance = 5 * time.Minute

// errSignature is a delivery whose signature does not verify: the bot acts on nothing it says.
var errSignature = errors.New("no v1 signature of webhook-signature verifies with the key's signing secret")

// Verify checks a delivery as the Standard Webhooks specification (standardwebhooks.com) has a
// receiver check it: the HMAC-SHA256, under the secret's key (the base64 after "whsec_"), of the
// webhook-id, the webhook-timestamp and the body joined by dots, against each "v1,<base64>" entry
// of webhook-signature, with the timestamp within Tolerance of now. The bot verifies it itself,
// as a bot written against the public API would, rather than with the desk's signing code.
func Verify(secret string, h http.Header, body []byte, now time.Time) error {
	id, stamp, signatures := h.Get("Webhook-Id"), h.Get("Webhook-Timestamp"), h.Get("Webhook-Signature")
	if id == "" || stamp == "" || signatures == "" {
		return errors.New("webhook-id, webhook-timestamp and webhook-signature are all required")
	}
	secs, err := strconv.ParseInt(stamp, 10, 64)
	if err != nil {
		return fmt.Errorf("webhook-timestamp %q is not Unix seconds", stamp)
	}
	if at := time.Unix(secs, 0); at.Before(now.Add(-Tolerance)) || at.After(now.Add(Tolerance)) {
		return fmt.Errorf("webhook-timestamp %s is more than %s from now: a replay, or a clock to fix", at.UTC().Format(time.RFC3339), Tolerance)
	}
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_"))
	if err != nil {
		return errors.New("the signing secret is not whsec_ and base64")
	}
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(id + "." + stamp + "."))
	mac.Write(body)
	want := mac.Sum(nil)
	for entry := range strings.FieldsSeq(signatures) {
		version, sig, ok := strings.Cut(entry, ",")
		if !ok || version != "v1" {
			continue // a scheme this bot does not know, as the specification has receivers skip it
		}
		got, err := base64.StdEncoding.DecodeString(sig)
		if err == nil && hmac.Equal(got, want) {
			return nil
		}
	}
	return errSignature
}
