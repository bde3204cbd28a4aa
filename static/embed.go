// Package static holds the built CSS and the browser scripts, embedded in the binary.
package static

import "embed"

//go:embed css/app.css js/desk.js js/reply.js js/sso.js
var FS embed.FS
