package main

import (
	"strings"
	"testing"
)

// secretPW is in every password of the pipelines below; nothing printed may
// contain it.
const secretPW = "Pw-s3cr3t"

// secretsPipeline has a password in each kind of connection string: a NATS
// URL (user and password), a NATS token, PostgreSQL DSNs as a URL, with a
// password parameter and as key=value pairs, a Kafka broker with user info,
// and an s3 checkpoint URL with credentials. Every
// server is 127.0.0.1:1, where nothing listens.
const secretsPipeline = `pipeline: p
checkpoint:
  dir: "s3://AKID:` + secretPW + `@bucket/ck?endpoint=http%3A%2F%2F127.0.0.1%3A1&region=us-east-1&use_path_style=true&timeout=2s"
sources:
  orders:
    type: nats
    url: "nats://ingest:` + secretPW + `@127.0.0.1:1"
    stream: ORDERS
    fields: {id: int}
  tokens:
    type: nats
    url: "nats://` + secretPW + `@127.0.0.1:1"
    stream: TOKENS
    fields: {id: int}
  clicks:
    type: kafka
    brokers: ["ingest:` + secretPW + `@127.0.0.1:1"]
    topic: clicks
    fields: {id: int}
sinks:
  pg_url:
    type: postgres
    input: orders
    table: t
    dsn: "postgres://postgres:` + secretPW + `@127.0.0.1:1/test"
  pg_param:
    type: postgres
    input: tokens
    table: t2
    dsn: "postgres://postgres@127.0.0.1:1/test?password=` + secretPW + `"
  pg_kv:
    type: postgres
    input: clicks
    table: t3
    dsn: "host=127.0.0.1 port=1 user=postgres dbname=test password='` + secretPW + `'"
`

// validate shows every connection with its secrets masked.
func TestValidateHidesSecrets(t *testing.T) {
	path := writePipeline(t, secretsPipeline)
	stdout, stderr, err := runCLI(validateCmd(), path)
	if err != nil {
		t.Fatalf("validate: %v\n%s", err, stderr)
	}
	if strings.Contains(stdout+stderr, "s3cr3t") {
		t.Errorf("validate shows a password:\n%s%s", stdout, stderr)
	}
	// The connections are shown, only their secrets are not.
	for _, s := range []string{
		"nats://ingest:xxxxx@127.0.0.1:1", "nats://xxxxx@127.0.0.1:1", "ingest:xxxxx@127.0.0.1:1",
		"postgres://postgres:xxxxx@127.0.0.1:1/test", "postgres://postgres@127.0.0.1:1/test?password=xxxxx",
		"host=127.0.0.1 port=1 user=postgres dbname=test password=xxxxx",
		"in s3://AKID:xxxxx@bucket/ck?endpoint=",
	} {
		if !strings.Contains(stdout, s) {
			t.Errorf("validate does not show %q:\n%s", s, stdout)
		}
	}
}

// run's start output, its log and its error hide the secrets of a pipeline
// whose connections fail at once.
func TestRunHidesSecrets(t *testing.T) {
	restart := "restart:\n  max_attempts: 1\n  delay: 10ms\n"
	fails := map[string]string{
		"s3 checkpoints": "storage/blob: lock s3://bucket/ck",
		"nats":           "connecting to nats://ingest:xxxxx@127.0.0.1:1",
		"postgres":       "dial tcp 127.0.0.1:1",
	}
	for name, src := range map[string]string{
		// The checkpoint storage is unreachable (its lock times out).
		"s3 checkpoints": restart + secretsPipeline,
		// NATS is unreachable.
		"nats": restart + `pipeline: p
sources:
  orders:
    type: nats
    url: "nats://ingest:` + secretPW + `@127.0.0.1:1"
    stream: ORDERS
    fields: {id: int}
sinks:
  out:
    type: file
    input: orders
    path: out
`,
		// PostgreSQL is unreachable, with each form of DSN.
		"postgres": restart + `pipeline: p
sources:
  events:
    type: datagen
    count: 10
sinks:
  pg_url:
    type: postgres
    input: events
    table: t
    dsn: "postgres://postgres:` + secretPW + `@127.0.0.1:1/test"
  pg_kv:
    type: postgres
    input: events
    table: t2
    dsn: "host=127.0.0.1 port=1 user=postgres dbname=test password=` + secretPW + `"
`,
	} {
		path := writePipeline(t, src)
		stdout, stderr, err := runCLI(runCmd(), path)
		if err == nil {
			t.Errorf("%s: run succeeded with nothing listening", name)
			continue
		}
		// The error names what failed, with its secrets masked.
		if !strings.Contains(stderr, "delivery guarantee: ") || !strings.Contains(err.Error(), fails[name]) {
			t.Errorf("%s: run printed no plan, or its error does not name %q: %v\n%s", name, fails[name], err, stderr)
		}
		for what, s := range map[string]string{"stdout": stdout, "stderr": stderr, "error": err.Error()} {
			if strings.Contains(s, "s3cr3t") {
				t.Errorf("%s: run's %s shows a password:\n%s", name, what, s)
			}
		}
	}
}

// checkpoints list names the storage it cannot reach without its secrets.
func TestCheckpointsListHidesSecrets(t *testing.T) {
	path := writePipeline(t, secretsPipeline)
	stdout, stderr, err := runCLI(checkpointsCmd(), "list", path)
	if err == nil || !strings.Contains(err.Error(), "s3://bucket/ck") {
		t.Fatalf("checkpoints list of unreachable storage: %v, want an error naming it", err)
	}
	for what, s := range map[string]string{"stdout": stdout, "stderr": stderr, "error": err.Error()} {
		if strings.Contains(s, "s3cr3t") {
			t.Errorf("checkpoints list's %s shows a password:\n%s", what, s)
		}
	}
}
