package config_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/ingest-engine/ingest/config"
)

// pw is the password of every connection string below.
const pw = "Pw-s3cr3t"

// No configuration error shows a password of the file, even one echoed by a
// field that has nothing to do with connections, and the errors keep their
// type.
func TestErrorsHideSecrets(t *testing.T) {
	for name, src := range map[string]string{
		"echoed by an int field": `pipeline: p
sources:
  events:
    type: datagen
    count: "postgres://u:` + pw + `@h/db"
sinks:
  out:
    type: stdout
    input: events
`,
		"echoed as a key=value DSN": `pipeline: p
parallelism: "host=h password=` + pw + `"
sources:
  events:
    type: datagen
sinks:
  out:
    type: stdout
    input: events
`,
		"a DSN the driver refuses": `pipeline: p
sources:
  events:
    type: datagen
sinks:
  out:
    type: postgres
    input: events
    table: t
    dsn: "host=127.0.0.1 port=notaport password=` + pw + `"
`,
		"a checkpoint URL": `pipeline: p
checkpoint:
  dir: "s3://AKID:` + pw + `@bucket/p?lease=forever"
sources:
  events:
    type: datagen
sinks:
  out:
    type: stdout
    input: events
`,
		"a secret field echoed elsewhere": `pipeline: p
parallelism: "` + pw + `"
x_token: "` + pw + `"
sources:
  events:
    type: datagen
sinks:
  out:
    type: stdout
    input: events
`,
		"a NATS token with a bad stream": `pipeline: p
sources:
  events:
    type: nats
    url: "nats://` + pw + `@127.0.0.1:1"
    stream: "a b"
sinks:
  out:
    type: stdout
    input: events
`,
	} {
		_, err := config.Parse("p.yaml", []byte(src))
		if err == nil {
			t.Errorf("%s: parsed", name)
			continue
		}
		if strings.Contains(err.Error(), "s3cr3t") {
			t.Errorf("%s: the error shows the password:\n%v", name, err)
		}
		var ce *config.Error
		if !errors.As(err, &ce) {
			t.Errorf("%s: %v holds no *config.Error", name, err)
		}
	}
}

// Redact hides the file's secrets in any text about the pipeline, in any
// escaping, and leaves text without them alone.
func TestRedact(t *testing.T) {
	p, _ := load(t, `pipeline: p
sources:
  events:
    type: nats
    url: "nats://u:p%40`+pw+`@127.0.0.1:1"
    stream: s
    fields: {id: int}
sinks:
  out:
    type: stdout
    input: events
`)
	for _, s := range []string{
		"server said: bad password p@" + pw,
		"url nats://u:p%40" + pw + "@127.0.0.1:1 refused",
		p.Stream.Name() + " " + mustPlan(t, p),
	} {
		if got := p.Redact(s); strings.Contains(got, "s3cr3t") {
			t.Errorf("Redact(%q) = %q", s, got)
		}
		err := p.RedactError(errors.New(s))
		if strings.Contains(err.Error(), "s3cr3t") {
			t.Errorf("RedactError(%q) = %q", s, err)
		}
	}
	if got := p.Redact("nothing secret at nats://127.0.0.1:1"); got != "nothing secret at nats://127.0.0.1:1" {
		t.Errorf("Redact changed %q", got)
	}
}

// mustPlan returns the plan's description.
func mustPlan(t *testing.T, p *config.Pipeline) string {
	t.Helper()
	plan, err := p.Stream.Plan()
	if err != nil {
		t.Fatal(err)
	}
	return plan.Describe()
}
