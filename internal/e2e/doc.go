// Package e2e holds end-to-end tests: whole pipelines run in process with
// injected failures, and the ingest binary killed with SIGKILL, each checked
// against the exact expected output.
package e2e
