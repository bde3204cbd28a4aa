// Package static holds the built CSS and the browser scripts, embedded in the binary.
package static

import "embed"

//go:embed css/app.css img/favicon.svg js/desk.js js/page.js js/reply.js js/signin.js
var FS embed.FS
