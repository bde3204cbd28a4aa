package server

import "testing"

// TestSafeNextKeepsTheRedirectOnThisSite runs the known open-redirect bypasses. A browser
// resolves Location against this site, strips tabs and newlines, and reads "\" as "/", so each
// of these would leave the site if it were passed through as it came.
func TestSafeNextKeepsTheRedirectOnThisSite(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ next, want string }{
		// Paths on this site pass, written out again from the parse.
		{"/", "/"},
		{"/queues/billing_t2", "/queues/billing_t2"},
		{"/queues/billing_t2?after=5&q=a%20b", "/queues/billing_t2?after=5&q=a%20b"},
		{"/handoffs/ho_1%2Fx", "/handoffs/ho_1%2Fx"}, // an encoded slash inside a path stays one
		{"/a/../handoffs/ho_1", "/handoffs/ho_1"},
		{"/login?next=%2F%2Fevil.example", "/login?next=%2F%2Fevil.example"}, // checked again when used
		// Nothing, or nothing that is a path.
		{"", "/"},
		{"queues/billing_t2", "/"},
		{"evil.example", "/"},
		// Another host: scheme-relative, with a scheme, or a scheme a browser runs.
		{"//evil.example", "/"},
		{"///evil.example", "/"},
		{"https://evil.example/", "/"},
		{"http:/evil.example", "/"},
		{"javascript:alert(1)", "/"},
		{"JaVaScRiPt:alert(1)", "/"},
		{"data:text/html,<script>alert(1)</script>", "/"},
		// Browsers drop tabs and newlines and leading blanks: these become "//evil.example".
		{"/\t/127.0.0.1:18998/x", "/"}, // the report: ?next=%2F%09%2F127.0.0.1%3A18998%2Fx
		{"/\t/evil.example", "/"},
		{"/\n/evil.example", "/"},
		{"/\r\n/evil.example", "/"},
		{"\t//evil.example", "/"},
		{" //evil.example", "/"},
		{"/\x00/evil.example", "/"},
		{"/\x7f/evil.example", "/"},
		{"/\r\nSet-Cookie: x=1", "/"},
		// Browsers read a backslash as a slash in http(s) URLs.
		{"/\\evil.example", "/"},
		{"\\/evil.example", "/"},
		{"\\\\evil.example", "/"},
		{"/\\/evil.example", "/"},
		{"/queues?x=\\", "/"},
		// A browser keeps these on this site, but a hop that decodes or cleans the path would not:
		// no desk page starts with an encoded slash or backslash, or holds a control character.
		{"/%2F%2Fevil.example", "/"},
		{"/%2fevil.example", "/"},
		{"/%5Cevil.example", "/"},
		{"/%5cevil.example", "/"},
		{"/%09/evil.example", "/"},
		{"/.//evil.example", "/"},
		{"/./%2Fevil.example", "/"},
		// Userinfo and non-ASCII: nothing the desk writes, and "@" tricks read as a host elsewhere.
		{"//user@evil.example", "/"},
		{"/ü", "/"},
		{"/\u3002evil.example", "/"},
		{"/%zz", "/"},
	} {
		if got := safeNext(tc.next); got != tc.want {
			t.Errorf("safeNext(%q) = %q, want %q", tc.next, got, tc.want)
		}
	}
}
