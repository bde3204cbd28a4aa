package server_test

import (
	"net/http"
	"strings"
	"testing"
)

// The authentication scheme is case-insensitive (RFC 9110 §11.1): a bot's client that writes
// "bearer" is as authenticated as one that writes "Bearer". Anything that is not the Bearer
// scheme followed by a key is still refused, and says how to send the key.
func TestBearerSchemeInAnyCase(t *testing.T) {
	t.Parallel()
	app := setup(t)
	key := app.botKey(t, "tier1", "billing_t2")
	get := func(authorization string) apiAnswer {
		return app.api(t, http.MethodGet, "/api/v1/handoffs?contact_id=cust_1", "", nil, "Authorization", authorization)
	}
	for _, scheme := range []string{"Bearer", "bearer", "BEARER", "bEaReR"} {
		expect(t, scheme+" <key>", get(scheme+" "+key), http.StatusOK)
	}
	expect(t, "a submit with bearer <key>", app.api(t, http.MethodPost, "/api/v1/handoffs", "", harbor(t, nil), "Authorization", "bearer "+key),
		http.StatusCreated)

	for _, authorization := range []string{"Basic " + key, "Bearer" + key, key, "Bearer ", "Bearers " + key} {
		got := get(authorization)
		expect(t, authorization, got, http.StatusUnauthorized)
		if !strings.HasPrefix(got.Header.Get("WWW-Authenticate"), "Bearer") {
			t.Errorf("%q: WWW-Authenticate %q, want the Bearer challenge", authorization, got.Header.Get("WWW-Authenticate"))
		}
	}
}
