// Package nexmark holds the Nexmark queries written in SQL (q*.sql), run by
// `ingest bench nexmark --sql` and compared with the Go API's (package
// nexmark/query) by this package's tests.
package nexmark

import "embed"

// Queries are the q*.sql files and side_input.jsonl, the table q13 looks
// up.
//
//go:embed *.sql side_input.jsonl
var Queries embed.FS
