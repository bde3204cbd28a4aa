package views

import "context"

type addressKey struct{}

// WithAddress says that the page rendered with ctx answers a form's POST and stands at address:
// the page it shows, which a GET loads again. The page puts it in the address bar in place of the
// form's (static/js/page.js), so that a reload shows the page and sends nothing again.
func WithAddress(ctx context.Context, address string) context.Context {
	return context.WithValue(ctx, addressKey{}, address)
}

// addressOf is the address WithAddress gave the page, or "" for a page loaded where it stands.
func addressOf(ctx context.Context) string {
	a, _ := ctx.Value(addressKey{}).(string)
	return a
}
