package config

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ingest-engine/ingest/connector"
)

// Every registered connector type has a builder, and every builder a
// registered spec: config builds exactly what the reference documents.
func TestEveryConnectorHasABuilder(t *testing.T) {
	for role, builders := range map[connector.Role][]string{
		connector.RoleSource: mapKeys(sourceTypes),
		connector.RoleSink:   mapKeys(sinkTypes),
	} {
		specs := connector.Types(role)
		if !slices.Equal(specs, builders) {
			t.Errorf("%s types: specs %v, builders %v; want the same", role, specs, builders)
		}
	}
}

func mapKeys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// Each spec's example loads, and loading it raises no internal error: the
// builder reads only declared fields, requires only required ones and applies
// the declared defaults (a builder reads every field it knows, given or not,
// so one example covers them all).
func TestBuildersFollowTheirSpecs(t *testing.T) {
	for _, role := range []connector.Role{connector.RoleSource, connector.RoleSink} {
		for _, spec := range connector.Specs(role) {
			t.Run(string(role)+"/"+spec.Type, func(t *testing.T) {
				if spec.Example == "" {
					t.Fatal("the spec has no Example")
				}
				dir := t.TempDir()
				// The file source's example reads CSV files with these columns.
				if err := os.MkdirAll(filepath.Join(dir, "input"), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(dir, "input", "trades.csv"), []byte("ts,symbol,price,qty\n2026-01-01T00:00:00Z,A,1.5,3\n"), 0o644); err != nil {
					t.Fatal(err)
				}
				example := spec.Example
				if spec.Type == "postgres_cdc" {
					// Loading describes the example's table on the server.
					example = strings.ReplaceAll(example, "public.accounts", specCDCTable(t))
				}
				node := "    " + strings.ReplaceAll(strings.TrimSpace(example), "\n", "\n    ") + "\n"
				src := "pipeline: p\ncheckpoint: {dir: ckpt}\nsources:\n"
				if role == connector.RoleSource {
					src += "  events:\n" + node + "sinks:\n  out: {type: stdout, input: events}\n"
				} else {
					src += "  events: {type: datagen, count: 10}\nsinks:\n  out:\n" + node
				}
				path := filepath.Join(dir, "p.yaml")
				_, err := Parse(path, []byte(src))
				if spec.Type == "iceberg" && !icebergBuilt {
					// This binary has no Iceberg sink: loading says how to build one.
					if err == nil || !strings.Contains(err.Error(), "go build -tags iceberg ./cmd/ingest") || len(flatten(err)) != 1 {
						t.Fatalf("loading an iceberg sink without the build tag: %v; want one error that says how to build with it", err)
					}
					return
				}
				if err != nil {
					var lines []string
					for _, e := range flatten(err) {
						lines = append(lines, e.Error())
					}
					t.Fatalf("the example does not load:\n%s\nerrors:\n  %s", src, strings.Join(lines, "\n  "))
				}
			})
		}
	}
}

// specCDCTable creates a table for the postgres_cdc example on the real
// PostgreSQL server (skipping the test, or failing it under
// INGEST_REQUIRE_SERVICES=1, without one) and returns its name.
func specCDCTable(t *testing.T) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, "postgres://postgres@127.0.0.1:5432/test")
	if err != nil {
		msg := fmt.Sprintf("PostgreSQL is not reachable on 127.0.0.1:5432 (%v); start it to run this test", err)
		if os.Getenv("INGEST_REQUIRE_SERVICES") == "1" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	name := fmt.Sprintf("public.spec_accounts_%d", time.Now().UnixNano())
	if _, err := conn.Exec(ctx, "CREATE TABLE "+name+" (id bigint PRIMARY KEY, owner text, balance bigint)"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = conn.Exec(context.Background(), "DROP TABLE "+name)
		_ = conn.Close(context.Background())
	})
	return name
}

// flatten returns the errors joined in err.
func flatten(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}

// A builder that reads a field its spec does not declare, requires one the
// spec calls optional, or applies another default than the spec's is told
// at once, as an internal error naming the connector and the field.
func TestABuilderDisagreeingWithItsSpecIsAnInternalError(t *testing.T) {
	spec := connector.Spec{Role: connector.RoleSource, Type: "probe", Fields: []connector.Field{
		{Name: "size", Kind: connector.Int, Default: "100"},
		{Name: "name", Kind: connector.String},
		{Name: "wm", Kind: connector.Mapping, Fields: []connector.Field{{Name: "delay", Kind: connector.Duration, Default: "1s"}}},
	}}
	for _, c := range []struct {
		name string
		read func(m *mapping)
		want string // "" for no error
	}{
		{"as declared", func(m *mapping) {
			m.int("size", 100)
			m.str("name", "")
			m.sub("wm").duration("delay", 1_000_000_000)
			m.int("parallelism", 7) // a node field, outside the spec
		}, ""},
		{"undeclared field", func(m *mapping) { m.str("colour", "") }, `builder reads field "colour", which its connector.Spec does not declare`},
		{"undeclared field via has", func(m *mapping) { m.has("colour") }, `builder reads field "colour"`},
		{"another default", func(m *mapping) { m.int("size", 10) }, `builder applies the default 10 to field "size", where its connector.Spec declares "100"`},
		{"a default the spec does not declare", func(m *mapping) { m.str("name", "x") }, `builder applies the default x to field "name", where its connector.Spec declares ""`},
		{"required but optional in the spec", func(m *mapping) { m.required("name") }, `builder requires field "name", which its connector.Spec does not mark required`},
		{"nested default", func(m *mapping) { m.sub("wm").duration("delay", 0) }, `field "delay", where its connector.Spec declares "1s"`},
		{"nested undeclared", func(m *mapping) { m.sub("wm").str("jitter", "") }, `the probe source wm builder reads field "jitter"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := &errs{file: "p.yaml"}
			m := newMapping(e, "sources.x", nil)
			m.decl = declare(spec, "type", "parallelism")
			c.read(m)
			var all, internal []string
			for _, err := range e.all() {
				var ce *Error
				if !errors.As(err, &ce) {
					t.Fatalf("error %v is not a *config.Error", err)
				}
				all = append(all, ce.Error())
				if strings.Contains(ce.Msg, "internal error") {
					internal = append(internal, ce.Error())
				}
			}
			switch {
			case c.want == "" && len(all) > 0:
				t.Errorf("errors %q, want none", all)
			case c.want != "" && (len(internal) != 1 || !strings.Contains(internal[0], c.want)):
				t.Errorf("errors %q, want one internal error containing %q", all, c.want)
			}
		})
	}
}
