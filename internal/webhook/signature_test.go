package webhook

import (
	"encoding/base64"
	"strings"
	"testing"
)

func TestSignatures(t *testing.T) {
	t.Parallel()
	body := []byte("The quick brown fox jumps over the lazy dog")
	// HMAC-SHA256 under "key" of "1700000000." and the body, computed independently with
	// `printf '%s' '1700000000.The quick…' | openssl dgst -sha256 -hmac key`.
	const v1 = "v1=2f658d6aef4f246e91cd741bbcded7479e9605f9d41c9e248122a117e0e1765b"
	if got := signature("key", "1700000000", body); got != v1 {
		t.Errorf("signature = %s, want %s", got, v1)
	}
	// The widely published example value of HMAC-SHA256("key", body).
	const legacy = "sha256=f7bc83f430538424b13298e6aa6fb143ef4d59a14946175997479dbc2d1a3cd8"
	if got := legacySignature("key", body); got != legacy {
		t.Errorf("legacySignature = %s, want %s", got, legacy)
	}
}

// Standard Webhooks' signature: the example of its specification and of Svix's documentation,
// and a secret from before the desk spoke the standard, which signs as the reference library's
// "raw" secret (`printf '%s' 'evt_1.1700000000.body' | openssl dgst -sha256 -hmac
// 'whsec_old-secret_abc' -binary | base64`).
func TestStandardSignatures(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ secret, id, timestamp, body, want string }{
		{"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "msg_p5jXN8AQM9LWM0D4loKWxJek", "1614265330", `{"test": 2432232314}`,
			"v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="},
		{"whsec_old-secret_abc", "evt_1", "1700000000", "body", "v1,WjBI3V8DwK7o7aFBoJQ/rXTds4o5aTVSQF5M4/k/hPw="},
	} {
		if got := standardSignature(c.secret, c.id, c.timestamp, []byte(c.body)); got != c.want {
			t.Errorf("standardSignature(%s) = %s, want %s", c.secret, got, c.want)
		}
	}
}

// A new secret is "whsec_" and the standard base64 of a 32-byte key, which Standard Webhooks'
// libraries decode.
func TestNewSecretIsStandard(t *testing.T) {
	t.Parallel()
	a, err := NewSecret()
	if err != nil {
		t.Fatal(err)
	}
	b, err := NewSecret()
	if err != nil {
		t.Fatal(err)
	}
	encoded, ok := strings.CutPrefix(a, "whsec_")
	key, err := base64.StdEncoding.DecodeString(encoded)
	if !ok || err != nil || len(key) != 32 || a == b {
		t.Errorf("NewSecret = %q, %q: want two different whsec_ + base64 of 32 bytes (%v)", a, b, err)
	}
}
