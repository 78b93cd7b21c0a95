package config

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ingest-engine/ingest/sql"
	"github.com/ingest-engine/ingest/storage/blob"
)

// FuzzParseSQL feeds ParseSQL, the SQL loader behind Load of a .sql file,
// arbitrary scripts (seeded with the SQL examples). Whatever the input, it
// returns a pipeline or an error, never both and never a panic; an error of
// the script names the file, with a line and column from 1.
//
// As FuzzParse does for YAML, it skips the scripts that would reach outside
// the process when planned: a source other than datagen and nexmark (which
// may sample a broker or files to infer its columns), a sink other than
// file, stdout and blackhole, and a checkpoint dir that is a URL other than
// mem://; and a file path that leaves the script's directory.
func FuzzParseSQL(f *testing.F) {
	for _, glob := range []string{"../examples/*.sql", "../examples/nexmark/*.sql"} {
		files, _ := filepath.Glob(glob)
		for _, file := range files {
			if data, err := os.ReadFile(file); err == nil {
				f.Add(data)
			}
		}
	}
	f.Add([]byte("CREATE SOURCE e WITH (connector = 'datagen', count = 10);\nCREATE SINK s AS SELECT * FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY key ORDER BY value DESC) AS rn FROM e) AS t WHERE rn <= 2 WITH (connector = 'stdout');"))
	f.Add([]byte("CREATE SOURCE e WITH (connector = 'datagen', count = 10);\nCREATE VIEW t AS SELECT key, count(*) AS n FROM e GROUP BY key HAVING count(*) > 1;\nCREATE SINK s AS SELECT n, sum(n) AS c FROM t GROUP BY n WITH (connector = 'file', path = 'out');"))
	path := filepath.Join(f.TempDir(), "q.sql")
	f.Fuzz(func(t *testing.T, data []byte) {
		if sqlReachesOutside(data) {
			t.Skip("the script would sample a service or files, or reach outside its directory")
		}
		p, err := ParseSQL(path, data)
		if (p == nil) == (err == nil) {
			t.Fatalf("ParseSQL returned the pipeline %v and the error %v", p != nil, err)
		}
		if err == nil {
			return
		}
		var se *sql.Error
		var ce *Error
		switch {
		case errors.As(err, &se):
			if se.File != path || se.Pos.Line < 1 || se.Pos.Column < 1 || se.Msg == "" {
				t.Fatalf("error %q does not name %s with a line and column", err, path)
			}
		case errors.As(err, &ce):
			if ce.File != path || ce.Msg == "" {
				t.Fatalf("error %q does not name %s", err, path)
			}
		default:
			t.Fatalf("error %q (%T) is neither a script's nor a configuration's error", err, err)
		}
	})
}

// sqlReachesOutside reports whether planning the script in data could reach
// a service or files outside its directory (see FuzzParseSQL). A script that
// does not parse is planned no further.
func sqlReachesOutside(data []byte) bool {
	script, err := sql.Parse("q.sql", string(data))
	if err != nil {
		return false
	}
	options := func(opts []sql.Option, allowed ...string) bool {
		for _, o := range opts {
			v := strings.ToLower(o.Value)
			switch {
			case o.Key == "connector" && !slices.Contains(allowed, v):
				return true
			case o.Key == "path" && (filepath.IsAbs(o.Value) || strings.Contains(filepath.ToSlash(o.Value), "..")):
				return true
			}
		}
		return false
	}
	for _, st := range script.Statements {
		if e, ok := st.(*sql.Explain); ok && e.Statement != nil {
			st = e.Statement
		}
		switch s := st.(type) {
		case *sql.CreateSource:
			if options(s.Options, "datagen", "nexmark") {
				return true
			}
		case *sql.CreateSink:
			if options(s.Options, "file", "stdout", "blackhole") {
				return true
			}
		case *sql.Set:
			if strings.HasPrefix(s.Name, "checkpoint.dir") && blob.IsURL(s.Value) && !strings.HasPrefix(strings.ToLower(s.Value), "mem://") {
				return true
			}
			if strings.HasPrefix(s.Name, "checkpoint.dir") && (filepath.IsAbs(s.Value) || strings.Contains(s.Value, "..")) {
				return true
			}
		}
	}
	return false
}
