// Package migrations holds the database schema as goose SQL files, embedded so that the one
// binary can migrate any database it is pointed at.
package migrations

import "embed"

//go:embed *.sql
var FS embed.FS
