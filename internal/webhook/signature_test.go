package webhook

import "testing"

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
