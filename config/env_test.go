package config_test

import (
	"strings"
	"testing"

	"github.com/ingest-engine/ingest/checkpoint"
	"github.com/ingest-engine/ingest/config"
)

// envPipeline is a valid pipeline whose name, rate and sink path are given.
func envPipeline(name, rate, path string) string {
	return "pipeline: " + name + `
sources:
  events:
    type: datagen
    rate: ` + rate + `
sinks:
  out:
    type: file
    input: events
    path: ` + path + "\n"
}

// ${VAR} takes the variable's value; ${VAR:-default} the default when the
// variable is unset or empty; $$ is a literal $; any other $ is itself.
func TestEnvSubstitution(t *testing.T) {
	t.Setenv("INGEST_T_NAME", "orders")
	t.Setenv("INGEST_T_RATE", "250")
	t.Setenv("INGEST_T_EMPTY", "")
	for _, c := range []struct {
		name, rate, path string
		wantName         string
		wantRate         string
		wantPath         string
	}{
		{"${INGEST_T_NAME}", "${INGEST_T_RATE}", "out/${INGEST_T_NAME}-x", "orders", "rate=250/s", "/p/out/orders-x"},
		{"pre-${INGEST_T_NAME}-${INGEST_T_NAME}", "${INGEST_T_UNSET:-75}", "out/${INGEST_T_EMPTY:-dflt}", "pre-orders-orders", "rate=75/s", "/p/out/dflt"},
		{"${INGEST_T_NAME:-other}", "1${INGEST_T_EMPTY}0", "out/${INGEST_T_EMPTY}", "orders", "rate=10/s", "/p/out"},
		{`"a$$b$${INGEST_T_NAME}"`, "5", "out/$${INGEST_T_NAME}$$$$${INGEST_T_NAME}", "a$b${INGEST_T_NAME}", "rate=5/s", "/p/out/${INGEST_T_NAME}$$orders"},
		{"price$ $x $", "5", "out/$HOME", "price$ $x $", "rate=5/s", "/p/out/$HOME"},
		{"${INGEST_T_UNSET:-}x", "5", "out", "x", "rate=5/s", "/p/out"},
	} {
		p, err := config.Parse("/p/p.yaml", []byte(envPipeline(c.name, c.rate, c.path)))
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		plan, err := p.Stream.Plan()
		if err != nil {
			t.Fatal(err)
		}
		desc := plan.Describe()
		if p.Name != c.wantName || !strings.Contains(desc, c.wantRate+",") || !strings.Contains(desc, "file "+c.wantPath+" (") {
			t.Errorf("%s: name %q, plan\n%s\nwant name %q, %s and path %s", c.name, p.Name, desc, c.wantName, c.wantRate, c.wantPath)
		}
	}
}

// A variable's value is text inside one scalar, whatever YAML syntax it
// holds: it adds no key, list item, comment or document, does not end a
// quoted string, and is not substituted again.
func TestEnvValuesCannotInjectYAML(t *testing.T) {
	t.Setenv("INGEST_T_OTHER", "injected")
	for _, v := range []string{
		"x\nsinks: {}\nparallelism: 9",
		"x\n  - a\n- b",
		"x # not a comment",
		`x" , injected: "y`,
		`x\"y'z\`,
		"x: y",
		"{a: 1}",
		"[1, 2]",
		"*alias &anchor !!int",
		"---\npipeline: two",
		"${INGEST_T_OTHER} and $$ and ${",
	} {
		t.Setenv("INGEST_T_NAME", v)
		for _, name := range []string{"${INGEST_T_NAME}", `"${INGEST_T_NAME}"`, "'${INGEST_T_NAME}'", "|\n  ${INGEST_T_NAME}"} {
			src := envPipeline(name, "5", "out")
			p, err := config.Parse("p.yaml", []byte(src))
			if err != nil {
				t.Errorf("value %q in %s: %v", v, name, err)
				continue
			}
			want := v
			if strings.HasPrefix(name, "|") {
				want += "\n" // a literal block keeps its final newline
			}
			if p.Name != want {
				t.Errorf("value %q in %s: pipeline name %q", v, name, p.Name)
			}
			plan, err := p.Stream.Plan()
			if err != nil {
				t.Fatal(err)
			}
			if len(plan.Nodes) != 2 || plan.Nodes[0].Parallelism != 1 || p.Checkpoint.Interval != checkpoint.DefaultOptions().Interval {
				t.Errorf("value %q in %s: the value added YAML:\n%s", v, name, plan.Describe())
			}
		}
	}
}

// A missing variable and a malformed reference are errors naming the file,
// the line (exact in a literal block too), the field and the reference, and
// no other error follows from them; a ${ in a comment is no error.
func TestEnvErrors(t *testing.T) {
	t.Setenv("INGEST_T_SET", "1")
	for _, c := range []struct{ src, want string }{
		{envPipeline("p", "${INGEST_T_MISSING}", "out"),
			"p.yaml:5: sources.events.rate: environment variable INGEST_T_MISSING is not set (${INGEST_T_MISSING:-default} gives a default)"},
		{envPipeline("p", "5", "out/${INGEST_T_SET}/${INGEST_T_MISSING}"),
			"p.yaml:10: sinks.out.path: environment variable INGEST_T_MISSING is not set"},
		{envPipeline("p", "5", "out/${INGEST_T_SET"), `p.yaml:10: sinks.out.path: "${INGEST_T_SET" has no closing } (write $$ for a literal $)`},
		{envPipeline("p", "5", "out/${}"), `p.yaml:10: sinks.out.path: "${}": no variable name (write $$ for a literal $)`},
		{envPipeline("p", "5", "out/${ X }"), `p.yaml:10: sinks.out.path: "${ X }": a variable name is letters, digits and _`},
		{envPipeline("p", "5", "out/${1X}"), `p.yaml:10: sinks.out.path: "${1X}": a variable name is letters`},
		{envPipeline("p", "5", "out/${X-d}"), `p.yaml:10: sinks.out.path: "${X-d}": the only forms are ${NAME} and ${NAME:-default}`},
		{envPipeline("p", "5", "out/${X:?unset}"), `p.yaml:10: sinks.out.path: "${X:?unset}": the only forms are`},
		{envPipeline("p", "5", "out/${X:-${Y}}"), `p.yaml:10: sinks.out.path: "${X:-${Y}": a default cannot hold another reference`},
		{envPipeline("|\n  first\n  second ${INGEST_T_MISSING}\n", "5", "out"), "p.yaml:3: pipeline: environment variable INGEST_T_MISSING is not set"},
		{"pipeline: p\nsources:\n  events:\n    type: datagen\n    rate: 5\nsinks:\n  out:\n    type: kafka\n    input: events\n    topic: t\n    brokers: [${INGEST_T_SET}]\n",
			`p.yaml:11: did not find expected ',' or ']' (a ${VAR} inside [...] or {...} must be quoted, e.g. brokers: ["${BROKER}"])`},
		{"pipeline: p\nsources:\n  events:\n    type: datagen\n    rate: [\"${INGEST_T_MISSING}\"]\n",
			"p.yaml:5: sources.events.rate[0]: environment variable INGEST_T_MISSING is not set"},
	} {
		_, err := config.Parse("p.yaml", []byte(c.src))
		if err == nil {
			t.Errorf("no error for\n%s", c.src)
			continue
		}
		lines := strings.Split(err.Error(), "\n")
		if len(lines) != 1 || !strings.HasPrefix(lines[0], c.want) {
			t.Errorf("errors:\n  %s\nwant only one, starting %q", strings.Join(lines, "\n  "), c.want)
		}
	}

	// Comments are never substituted: neither an unset variable nor an
	// unterminated reference in one is an error.
	src := "# rate: ${INGEST_T_MISSING} ${\n" + envPipeline("p # ${INGEST_T_MISSING", "5 # ${}", "out   # ${INGEST_T_MISSING:-x")
	if p, err := config.Parse("p.yaml", []byte(src)); err != nil || p.Name != "p" {
		t.Errorf("references in comments: %v", err)
	}
}

// A secret that comes from the environment is masked like one written in
// the file: the password of a substituted DSN, a substituted token.
func TestEnvSecretsAreMasked(t *testing.T) {
	t.Setenv("INGEST_T_PW", pw)
	t.Setenv("INGEST_T_TOKEN", "tok-"+pw)
	src := `pipeline: p
http:
  token: ${INGEST_T_TOKEN}
sources:
  events:
    type: datagen
sinks:
  out:
    type: postgres
    input: events
    table: t
    dsn: postgres://u:${INGEST_T_PW}@127.0.0.1:1/db
`
	p, err := config.Parse("p.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	if p.HTTPToken != "tok-"+pw {
		t.Fatalf("token %q", p.HTTPToken)
	}
	for _, s := range []string{"postgres://u:" + pw + "@127.0.0.1:1/db", "token tok-" + pw} {
		if got := p.Redact(s); strings.Contains(got, pw) {
			t.Errorf("Redact(%q) = %q", s, got)
		}
	}
	// The error of a malformed value built from a secret shows no secret.
	_, err = config.Parse("p.yaml", []byte(strings.Replace(src, "    type: datagen\n", "    type: datagen\n    count: postgres://u:${INGEST_T_PW}@h/db\n", 1)))
	if err == nil || strings.Contains(err.Error(), pw) || !strings.Contains(err.Error(), "is not a whole number") {
		t.Errorf("error %v", err)
	}
}
