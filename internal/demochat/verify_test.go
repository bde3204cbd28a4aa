package demochat

import (
	"net/http"
	"strings"
	"testing"
	"time"
)

// The test vector the Standard Webhooks specification publishes (its libraries' "sign function
// works" case): a bot that verifies it verifies what any conforming sender signs.
func TestVerifyPassesTheSpecificationsTestVector(t *testing.T) {
	const (
		secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
		body   = `{"test": 2432232314}`
		sig    = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
	)
	at := time.Unix(1614265330, 0)
	headers := func(id, stamp, signature string) http.Header {
		h := http.Header{}
		h.Set("Webhook-Id", id)
		h.Set("Webhook-Timestamp", stamp)
		h.Set("Webhook-Signature", signature)
		return h
	}
	if err := Verify(secret, headers("msg_p5jXN8AQM9LWM0D4loKWxJek", "1614265330", sig), []byte(body), at); err != nil {
		t.Fatalf("the specification's vector: %v", err)
	}
	// A rotation's overlap sends several entries, and a scheme the bot does not know is skipped.
	if err := Verify(secret, headers("msg_p5jXN8AQM9LWM0D4loKWxJek", "1614265330", "v2,AAAA v1,bm90IGl0 "+sig), []byte(body), at); err != nil {
		t.Errorf("the vector among other entries: %v", err)
	}
	for _, c := range []struct {
		name, id, stamp, sig, body string
		now                        time.Time
		want                       string
	}{
		{"another body", "msg_p5jXN8AQM9LWM0D4loKWxJek", "1614265330", sig, `{"test": 2432232315}`, at, "no v1 signature"},
		{"another id", "msg_other", "1614265330", sig, body, at, "no v1 signature"},
		{"another timestamp", "msg_p5jXN8AQM9LWM0D4loKWxJek", "1614265331", sig, body, at, "no v1 signature"},
		{"replayed later", "msg_p5jXN8AQM9LWM0D4loKWxJek", "1614265330", sig, body, at.Add(Tolerance + time.Second), "more than 5m0s from now"},
		{"no signature", "msg_p5jXN8AQM9LWM0D4loKWxJek", "1614265330", "", body, at, "are all required"},
	} {
		err := Verify(secret, headers(c.id, c.stamp, c.sig), []byte(c.body), c.now)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error saying %q", c.name, err, c.want)
		}
	}
}
