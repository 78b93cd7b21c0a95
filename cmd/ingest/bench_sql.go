package main

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/ingest-engine/ingest/config"
	nexmarksql "github.com/ingest-engine/ingest/examples/nexmark"
	"github.com/ingest-engine/ingest/nexmark"
	"github.com/ingest-engine/ingest/sql"
	"github.com/ingest-engine/ingest/stream"
)

// sqlBench returns the builder of the SQL version of Nexmark query name
// (examples/nexmark/<name>.sql) for query.BenchOptions.Build: its nexmark
// sources read the bench's events (count, event-time density, rate), its
// sinks are blackholes (as the Go API query's discard sink), and every node
// has the bench's parallelism.
func sqlBench(name string) func(nexmark.SourceConfig, int) (*stream.Pipeline, int64, error) {
	return func(src nexmark.SourceConfig, par int) (*stream.Pipeline, int64, error) {
		file := name + ".sql"
		text, err := nexmarksql.Queries.ReadFile(file)
		if err != nil {
			have, _ := fs.Glob(nexmarksql.Queries, "*.sql")
			return nil, 0, fmt.Errorf("no SQL version of %s (have %s)", name, strings.Join(have, ", "))
		}
		script, err := sql.Parse(file, string(text))
		if err != nil {
			return nil, 0, err
		}
		gen, err := nexmark.NewGenerator(src.Generator)
		if err != nil {
			return nil, 0, err
		}
		var records int64
		for _, st := range script.Statements {
			switch s := st.(type) {
			case *sql.CreateSource:
				connector, table := "", ""
				var kept []sql.Option
				for _, o := range s.Options {
					switch o.Key {
					case "connector":
						connector = o.Value
					case "nexmark.table.type":
						table = strings.ToLower(o.Value)
					case "nexmark.event.num", "nexmark.min.event.gap.in.ns", "nexmark.split.num":
						continue // the bench's
					}
					kept = append(kept, o)
				}
				if s.Table && connector == "file" {
					// A table lookups read (q13's side input): the
					// embedded file, written where the plan finds it.
					if err := benchTable(s); err != nil {
						return nil, 0, fmt.Errorf("%s: table %s: %w", file, s.Name, err)
					}
					continue
				}
				if connector != "nexmark" {
					return nil, 0, fmt.Errorf("%s: source %s is not a nexmark source", file, s.Name)
				}
				kept = append(kept, sql.Option{Key: "events", Value: strconv.FormatInt(src.Events, 10), Pos: s.Pos})
				if eps := src.Generator.EventsPerSecond; eps > 0 {
					kept = append(kept, sql.Option{Key: "events_per_second", Value: strconv.FormatInt(eps, 10), Pos: s.Pos})
				}
				if src.Rate > 0 {
					kept = append(kept, sql.Option{Key: "rate", Value: strconv.FormatFloat(src.Rate, 'g', -1, 64), Pos: s.Pos})
				}
				s.Options = kept
				typ := map[string]nexmark.EventType{"person": nexmark.PersonEvent, "auction": nexmark.AuctionEvent, "bid": nexmark.BidEvent}[table]
				records += gen.Count(typ, src.Events)
			case *sql.CreateSink:
				s.Options = []sql.Option{{Key: "connector", Value: "blackhole", Pos: s.Pos}}
			}
		}
		script.Statements = slices.Insert(script.Statements, 0, sql.Statement(&sql.Set{Name: "parallelism", Value: strconv.Itoa(par), Pos: sql.Pos{Line: 1, Column: 1}}))
		p, err := config.PlanSQL(filepath.Join("examples", "nexmark", file), script)
		if err != nil {
			return nil, 0, err
		}
		return p.Stream, records, nil
	}
}

// benchTable points table s, whose path names a file embedded beside the
// queries, at a copy of it in a temporary directory.
func benchTable(s *sql.CreateSource) error {
	for i, o := range s.Options {
		if o.Key != "path" {
			continue
		}
		data, err := nexmarksql.Queries.ReadFile(o.Value)
		if err != nil {
			return err
		}
		dir, err := os.MkdirTemp("", "ingest-bench-table-")
		if err != nil {
			return err
		}
		path := filepath.Join(dir, filepath.Base(o.Value))
		if err := os.WriteFile(path, data, 0o644); err != nil {
			return err
		}
		s.Options[i].Value = path
	}
	return nil
}
