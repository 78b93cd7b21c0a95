// Package nexmark holds the Nexmark queries written in SQL (q*.sql), run by
// `ingest bench nexmark --sql` and compared with the Go API's (package
// nexmark/query) by this package's tests.
package nexmark

import "embed"

// Queries are the q*.sql files.
//
//go:embed *.sql
var Queries embed.FS
