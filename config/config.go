// Package config turns a YAML pipeline file into the same graph the Go API
// builds, with dynamic rows as records. Errors name the file, line and field.
// Relative paths resolve against the directory of the pipeline file.
package config

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/ingest-engine/ingest/checkpoint"
	"github.com/ingest-engine/ingest/internal/redact"
	"github.com/ingest-engine/ingest/row"
	"github.com/ingest-engine/ingest/runtime"
	"github.com/ingest-engine/ingest/state"
	"github.com/ingest-engine/ingest/storage"
	"github.com/ingest-engine/ingest/storage/blob"
	"github.com/ingest-engine/ingest/stream"
)

// Pipeline is a loaded pipeline file.
type Pipeline struct {
	// File is the path of the pipeline file.
	File string
	// Name is the pipeline's name.
	Name string
	// Checkpoint are the effective checkpoint options.
	Checkpoint checkpoint.Options
	// CheckpointDir is the absolute checkpoint directory, or an object
	// storage URL (s3://, file://, mem://; see storage/blob).
	CheckpointDir string
	// storage is the opened object storage when CheckpointDir is a URL.
	storage storage.Storage
	// Restart is the effective restart strategy.
	Restart runtime.RestartOptions
	// State is where keyed state lives: nil keeps it in memory (state.backend:
	// memory, the default); set, in Pebble stores below its Dir
	// (state.backend: pebble).
	State *state.LSMOptions
	// Stream is the built graph.
	Stream *stream.Pipeline
	// Explain says the pipeline is a SQL script's EXPLAIN: `ingest run` and
	// `ingest validate` print its plan, and nothing runs.
	Explain bool
	// Warnings are findings that do not stop the pipeline, in file order:
	// expressions whose results change when records are replayed after a
	// recovery, transforms and side outputs that nothing reads. `ingest
	// validate` and `ingest run` print them.
	Warnings []Warning
	// Require is the weakest delivery guarantee checkpoint.require allows;
	// runtime.DeliveryNone, which every pipeline satisfies, when it is not
	// set. Load refuses a pipeline whose guarantee (see Delivery) is weaker.
	Require runtime.DeliveryLevel
	// HTTPToken is http.token: the bearer token the HTTP API's POST
	// endpoints require ("" refuses them; INGEST_HTTP_TOKEN overrides it,
	// see httpapi.Token).
	HTTPToken string
	// WritesStdout says whether a sink (type: stdout) prints records to
	// standard output: then `ingest run` keeps its status line off a
	// terminal the records go to.
	WritesStdout bool
	// caveats qualify the guarantee without weakening it (Delivery).
	caveats []caveat
	// secrets masks the secrets of the file's connection strings (Redact).
	secrets redact.Scrubber
}

// RunOptions returns the options to run the pipeline with.
func (p *Pipeline) RunOptions() stream.RunOptions {
	return stream.RunOptions{Checkpoint: p.Checkpoint, CheckpointDir: p.CheckpointDir, Storage: p.storage, Restart: p.Restart, LSM: p.State}
}

// yamlLine matches the "line N: " prefix of YAML syntax errors.
var yamlLine = regexp.MustCompile(`^line (\d+): `)

// named is a built stream of rows and its schema.
type named struct {
	s      stream.Stream[row.Row]
	schema *row.Schema
	// changelog, when set, says the stream is a changelog keyed by these
	// fields (see aggregates.go); nil for a stream of records.
	changelog []string
	// groupable, when set, is a join not built yet, which its only reader
	// may fold into itself (groupjoin.go); s is unset until then.
	groupable *groupableJoin
}

// builder holds what Load is building.
type builder struct {
	// storage is the object storage of a checkpoint.dir URL.
	storage storage.Storage
	e       *errs
	dir     string // directory of the pipeline file
	p       *stream.Pipeline
	streams map[string]named
	par     int64 // default parallelism
	maxPar  int64
	ids     map[string]*yaml.Node
	// warnings are collected as nodes are built.
	warnings []Warning
	// checkpointDir and paths are the directories claimed so far.
	checkpointDir string
	paths         map[string]*yaml.Node
	// fileGlobs and fileSinks are the file sources' globs and the file
	// sinks' directories, checked against each other (checkFeedback).
	fileGlobs []fileGlob
	fileSinks []fileSinkDir
	// sides are the side outputs declared so far, in file order; their
	// streams are in streams under "node.output".
	sides []sideOutput
	// used holds every reference (input, left, right) resolved so far.
	used map[string]bool
	// readers holds, per node name, what the file's transforms and sinks
	// that name it as an input are (see readersOf).
	readers map[string][]reader
	// embedded is set when a Go program adds the document to its pipeline
	// (AddSQL): the program may read any transform.
	embedded bool
	// writesStdout is set once a stdout sink is built.
	writesStdout bool
	// declared holds the names of the file's sources and transforms, built
	// or not yet.
	declared map[string]bool
	// caveats are the nondeterministic expressions found so far, and
	// requireAt is the value of checkpoint.require (nil when unset).
	caveats   []caveat
	requireAt *yaml.Node
}

// sideOutput is a node's declared side output.
type sideOutput struct {
	// node and name make its reference, node.name.
	node, name string
	// at and field are where it is declared.
	at    *yaml.Node
	field string
}

// declareSide declares side output name of node, at YAML value at of field;
// until a stream is built for it, consumers see a node that failed.
func (b *builder) declareSide(node, name string, at *yaml.Node, field string) {
	b.sides = append(b.sides, sideOutput{node: node, name: name, at: at, field: field})
	b.failed(node + "." + name)
}

// Load reads, validates and builds a pipeline file: YAML, or SQL when its
// name ends in .sql (ParseSQL).
func Load(path string) (*Pipeline, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading pipeline: %w", err)
	}
	if strings.EqualFold(filepath.Ext(path), ".sql") {
		return ParseSQL(path, data)
	}
	return Parse(path, data)
}

// Parse builds a pipeline from the YAML in data; path names it in errors and
// anchors relative paths.
func Parse(path string, data []byte) (*Pipeline, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("pipeline path %s: %w", path, err)
	}
	e := &errs{file: path}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		msg := strings.TrimPrefix(err.Error(), "yaml: ")
		line := 0
		if m := yamlLine.FindStringSubmatch(msg); m != nil {
			line, _ = strconv.Atoi(m[1])
			msg = msg[len(m[0]):]
		}
		if msg == "mapping values are not allowed in this context" {
			// The usual cause is an unquoted expression: a ? b : c.
			msg += ` (a value containing ": " must be quoted, e.g. x: "value > 5 ? 'big' : 'small'")`
		}
		if strings.HasPrefix(msg, "did not find expected ',' or ") {
			// The YAML parser numbers the lines of this error from 0 (the
			// line of the flow collection's start, or of the problem when
			// that is line 0), and leaves out line 0.
			line++
			if bytes.Contains(data, []byte("${")) {
				// YAML reads the { of a plain ${VAR} in [...] or {...} as syntax.
				msg += ` (a ${VAR} inside [...] or {...} must be quoted, e.g. brokers: ["${BROKER}"])`
			}
		}
		return nil, &Error{File: path, Line: line, Msg: redact.Text(msg)}
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) == 0 {
		return nil, &Error{File: path, Msg: "the file is empty"}
	}
	return build(e, path, abs, &doc, nil)
}

// build builds the pipeline of a YAML document, parsed from a YAML file or
// made from a SQL script (sql.go); path names the file, abs is its absolute
// path.
//
// With emb, the document adds to a pipeline a Go program builds (AddSQL):
// its tables are inputs, sources and sinks are optional, and the pipeline is
// not planned yet (the program goes on adding to it).
func build(e *errs, path, abs string, doc *yaml.Node, emb *embedding) (*Pipeline, error) {
	substitute(e, doc, "", os.LookupEnv) // env.go
	secrets := fileSecrets(doc)
	if e.failed() {
		// A missing variable would only cause other errors further on.
		return nil, errors.Join(scrubErrors(secrets, e.all())...)
	}
	top := newMapping(e, "", doc.Content[0])
	out := &Pipeline{File: path, secrets: secrets}
	out.Name = top.required("pipeline")
	b := &builder{e: e, dir: filepath.Dir(abs), streams: map[string]named{}, ids: map[string]*yaml.Node{}, paths: map[string]*yaml.Node{}, used: map[string]bool{}}
	b.maxPar = top.int("max_parallelism", state.DefaultMaxParallelism)
	if b.maxPar < 1 || b.maxPar > state.UpperBoundMaxParallelism {
		e.add(top.get("max_parallelism"), "max_parallelism", "must be between 1 and %d", state.UpperBoundMaxParallelism)
		b.maxPar = state.DefaultMaxParallelism
	}
	b.par = top.int("parallelism", 1)
	top.positive("parallelism", b.par > 0)
	if b.par > b.maxPar {
		e.add(top.get("parallelism"), "parallelism", "%d exceeds max_parallelism %d", b.par, b.maxPar)
	}
	b.par = min(max(b.par, 1), b.maxPar)
	b.p = stream.New(out.Name, stream.DefaultParallelism(int(b.par)), stream.MaxParallelism(int(b.maxPar)))
	if emb != nil {
		b.p = emb.p
		b.embedded = true
		for name, t := range emb.tables {
			b.streams[name] = named{s: t.Stream, schema: t.Schema, changelog: t.Changelog}
		}
	}

	out.Checkpoint, out.CheckpointDir, out.Require = b.checkpoint(top.sub("checkpoint"))
	out.storage = b.storage
	b.checkpointDir = out.CheckpointDir
	out.Restart = b.restart(top.sub("restart"))
	out.HTTPToken = b.http(top.sub("http"))

	sources, transforms := top.sub("sources"), top.sub("transforms")
	b.readers = readersOf(transforms.node, top.get("sinks"))
	b.declared = map[string]bool{}
	for _, name := range append(slices.Clone(sources.keys), transforms.keys...) {
		b.declared[name] = true
	}
	for name := range emb.tableNames() {
		b.declared[name] = true
	}
	if len(sources.keys) == 0 && emb == nil {
		e.add(top.line("sources"), "sources", "a pipeline needs at least one source")
	}
	for _, name := range sources.keys {
		b.source(name, sources.line(name), sources.sub(name))
	}
	sources.done()
	b.transforms(transforms)
	sinks := top.sub("sinks")
	if len(sinks.keys) == 0 && emb == nil {
		e.add(top.line("sinks"), "sinks", "a pipeline needs at least one sink")
	}
	for _, name := range sinks.keys {
		b.sink(name, sinks.line(name), sinks.sub(name))
	}
	sinks.done()
	out.State = b.state(top.sub("state"))
	top.done()
	b.unreadSideOutputs()
	if emb == nil {
		b.unreadTransforms(transforms) // the program reads the views
	}
	b.checkFeedback()
	if e.failed() {
		return nil, errors.Join(scrubErrors(out.secrets, e.all())...)
	}
	if emb != nil {
		emb.streams = b.streams
		out.Stream = b.p
		out.Warnings = b.warnings
		return out, nil
	}
	if _, err := b.p.Plan(); err != nil {
		return nil, &Error{File: path, Msg: out.secrets.String(err.Error())}
	}
	out.Stream = b.p
	out.WritesStdout = b.writesStdout
	slices.SortStableFunc(b.warnings, func(a, b Warning) int { return a.Line - b.Line })
	out.Warnings = b.warnings
	slices.SortStableFunc(b.caveats, func(a, b caveat) int { return a.line - b.line })
	out.caveats = b.caveats
	if err := out.checkRequire(b.requireAt); err != nil {
		return nil, err
	}
	return out, nil
}

// path resolves a path against the pipeline file's directory.
func (b *builder) path(p string) string {
	if p == "" || filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(b.dir, p)
}

// id checks a node name, given by key node k: a valid id, unique across
// sources, transforms and sinks.
func (b *builder) id(name string, k *yaml.Node, m *mapping) {
	if !runtime.NodeIDPattern.MatchString(name) {
		b.e.add(k, m.path, "a name uses letters, digits, '_' and '-', and starts with a letter or digit")
	}
	if prev, dup := b.ids[name]; dup {
		b.e.add(k, m.path, "the name %q is already used at line %d", name, prev.Line)
		return
	}
	b.ids[name] = k
}

// claimPath reserves a file sink's directory: two sinks, or a sink and the
// checkpoint directory, must not share or nest directories — each sink's
// recovery deletes its whole staging area and commits by checkpoint id, and
// checkpoint files inside a sink directory would read as committed output.
func (b *builder) claimPath(path string, m *mapping) {
	if path == "" {
		return
	}
	nested := func(a, b string) bool {
		rel, err := filepath.Rel(a, b)
		return err == nil && (rel == "." || (rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))))
	}
	if nested(path, b.checkpointDir) || nested(b.checkpointDir, path) {
		b.e.add(m.get("path"), m.field("path"), "%s overlaps the checkpoint directory %s", path, b.checkpointDir)
	}
	for other, at := range b.paths {
		if nested(path, other) || nested(other, path) {
			b.e.add(m.get("path"), m.field("path"), "%s overlaps the path of the sink at line %d: each file sink needs a directory of its own", path, at.Line)
		}
	}
	b.paths[path] = m.get("path")
}

// failed records that node name could not be built, so nodes reading it do
// not report it as undefined.
func (b *builder) failed(name string) {
	if _, ok := b.streams[name]; !ok {
		b.streams[name] = named{}
	}
}

// parallelism is the node's `parallelism` option. Without the field the
// node keeps the pipeline's default, which a connector's descriptor may cap
// (a NATS source reads with one subtask).
func (b *builder) parallelism(m *mapping) stream.NodeOption {
	if m.get("parallelism") == nil {
		return func(*runtime.Node) {}
	}
	p := m.int("parallelism", b.par)
	m.positive("parallelism", p > 0)
	if p > b.maxPar {
		b.e.add(m.get("parallelism"), m.field("parallelism"), "%d exceeds max_parallelism %d", p, b.maxPar)
	}
	return stream.Parallelism(int(min(max(p, 1), b.maxPar)))
}

func (b *builder) checkpoint(m *mapping) (checkpoint.Options, string, runtime.DeliveryLevel) {
	o := checkpoint.DefaultOptions()
	o.Interval = m.duration("interval", o.Interval)
	if o.Interval < 0 {
		b.e.add(m.get("interval"), m.field("interval"), "must not be negative (0 disables periodic checkpoints)")
	}
	o.Timeout = m.duration("timeout", o.Timeout)
	m.positive("timeout", o.Timeout > 0)
	o.MinPause = m.duration("min_pause", o.MinPause)
	if o.MinPause < 0 {
		b.e.add(m.get("min_pause"), m.field("min_pause"), "must not be negative")
	}
	o.MaxConcurrent = int(m.int("max_concurrent", int64(o.MaxConcurrent)))
	m.positive("max_concurrent", o.MaxConcurrent > 0)
	o.TolerableFailures = int(m.int("tolerable_failures", int64(o.TolerableFailures)))
	if o.TolerableFailures < 0 {
		b.e.add(m.get("tolerable_failures"), m.field("tolerable_failures"), "must not be negative")
	}
	o.Retain = int(m.int("retain", int64(o.Retain)))
	m.positive("retain", o.Retain > 0)
	o.StagingMaxAge = m.duration("staging_max_age", o.StagingMaxAge)
	if mode := m.str("mode", ""); mode != "" {
		var err error
		if o.Mode, err = checkpoint.ParseMode(mode); err != nil {
			b.e.add(m.get("mode"), m.field("mode"), "%v", err)
		}
	}
	require := b.requireDelivery(m)
	dir := m.str("dir", "data/checkpoints")
	if blob.IsURL(dir) {
		st, err := blob.OpenStorage(context.Background(), dir)
		if err != nil {
			b.e.add(m.get("dir"), m.field("dir"), "%v", err)
		}
		b.storage = st
	} else {
		dir = b.path(dir)
	}
	m.done()
	return o, dir, require
}

// restart reads the restart block. Every field is optional; max_attempts
// keeps the meaning it had under the former fixed-delay strategy (restarts
// in a row without a completed checkpoint; 0 turns restarts off), so an
// explicit old block still bounds the restarts as it did, with growing
// pauses unless it sets multiplier: 1.
func (b *builder) restart(m *mapping) runtime.RestartOptions {
	o := runtime.DefaultRestartOptions()
	o.Delay = m.duration("delay", o.Delay)
	m.nonNegative("delay", o.Delay >= 0)
	o.MaxDelay = m.duration("max_delay", o.MaxDelay)
	m.positive("max_delay", o.MaxDelay > 0)
	o.Multiplier = m.float("multiplier", o.Multiplier)
	if m.vals["multiplier"] != nil && !m.bad["multiplier"] && o.Multiplier < 1 {
		m.fail("multiplier", m.vals["multiplier"], "must be at least 1 (1: a fixed delay)")
	}
	o.Jitter = m.float("jitter", o.Jitter)
	if m.vals["jitter"] != nil && !m.bad["jitter"] && (o.Jitter < 0 || o.Jitter >= 1) {
		m.fail("jitter", m.vals["jitter"], "must be at least 0 and below 1 (0.1: each delay varies by up to ±10%%)")
	}
	o.GiveUpAfter = m.duration("give_up_after", o.GiveUpAfter)
	m.nonNegative("give_up_after", o.GiveUpAfter >= 0)
	attempts := m.int("max_attempts", -1)
	switch {
	case attempts == 0:
		// Restarts off: the first failure ends the job.
		o.GiveUpAfter, o.MaxAttempts = 0, 0
	case attempts > 0:
		o.MaxAttempts = int(attempts)
	case m.vals["max_attempts"] != nil && !m.bad["max_attempts"]:
		m.fail("max_attempts", m.vals["max_attempts"], "must not be negative")
	case m.vals["give_up_after"] != nil && o.GiveUpAfter == 0:
		m.fail("give_up_after", m.vals["give_up_after"], "0 (no time limit) needs max_attempts: restarts must end")
	}
	if len(m.bad) == 0 && (o.GiveUpAfter > 0 || o.MaxAttempts > 0) {
		if o.MaxDelay < o.Delay {
			m.fail("max_delay", m.line("max_delay"), "%v is shorter than delay %v", o.MaxDelay, o.Delay)
		} else if o.Delay == 0 && o.Multiplier > 1 {
			m.fail("delay", m.line("delay"), "0 never grows: give a positive delay, or multiplier: 1 for restarts without a pause")
		}
	}
	m.done()
	return o
}

// http reads the http block, the settings of ingest run's HTTP server, and
// returns its token.
// state reads the state section: where keyed state lives. Its directory
// must not overlap the checkpoint directory or a file sink's: checkpoint
// files or sink output inside it (or it inside them) would be read as the
// other's.
func (b *builder) state(m *mapping) *state.LSMOptions {
	defer m.done()
	switch backend := m.str("backend", "memory"); backend {
	case "memory":
		for _, k := range []string{"dir", "cache"} {
			if m.has(k) {
				b.e.add(m.get(k), m.field(k), "applies to backend: pebble only (state is in memory)")
			}
		}
		return nil
	case "pebble":
	default:
		b.e.add(m.get("backend"), m.field("backend"), "unknown state backend %q (known: memory, pebble)", backend)
		return nil
	}
	o := &state.LSMOptions{Dir: b.path(m.required("dir")), CacheBytes: m.size("cache", state.DefaultLSMCacheBytes)}
	m.positive("cache", o.CacheBytes > 0)
	if o.Dir == "" {
		return o
	}
	nested := func(a, c string) bool {
		rel, err := filepath.Rel(a, c)
		return err == nil && (rel == "." || (rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))))
	}
	if b.checkpointDir != "" && (nested(o.Dir, b.checkpointDir) || nested(b.checkpointDir, o.Dir)) {
		b.e.add(m.get("dir"), m.field("dir"), "%s overlaps the checkpoint directory %s: the state directory is the engine's working copy, the checkpoint directory its durable one", o.Dir, b.checkpointDir)
	}
	for other, at := range b.paths {
		if nested(o.Dir, other) || nested(other, o.Dir) {
			b.e.add(m.get("dir"), m.field("dir"), "%s overlaps the path of the sink at line %d", o.Dir, at.Line)
		}
	}
	return o
}

func (b *builder) http(m *mapping) string {
	token := m.str("token", "")
	m.done()
	return token
}

// input resolves the input field of a transform or sink.
func (b *builder) input(m *mapping) (named, bool) { return b.ref(m, "input") }

// ref resolves the stream that field key of m names: a source or transform,
// or node.output for a node's side output (a window's late records,
// late_records: output).
func (b *builder) ref(m *mapping, key string) (named, bool) {
	s, ok := b.refGroupable(m, key)
	if s.groupable != nil {
		s = b.buildJoin(m.str(key, ""), s)
	}
	return s, ok
}

// refGroupable is ref, but leaves a groupable join unbuilt, for the reader
// that may fold it (groupjoin.go).
func (b *builder) refGroupable(m *mapping, key string) (named, bool) {
	in := m.required(key)
	if in == "" {
		return named{}, false
	}
	b.used[in] = true
	s, ok := b.streams[in]
	if ok {
		// A stream without schema failed to build and reported why.
		return s, s.schema != nil
	}
	if node, out, dotted := strings.Cut(in, "."); dotted {
		if _, defined := b.streams[node]; defined {
			var outs []string
			for _, so := range b.sides {
				if so.node == node {
					outs = append(outs, so.name)
				}
			}
			if len(outs) == 0 {
				b.e.add(m.get(key), m.field(key), "%s has no side outputs, so %q names nothing (a window declares one with late_records: <name>)", node, out)
			} else {
				b.e.add(m.get(key), m.field(key), "%s has no side output %q (its side outputs: %s)", node, out, strings.Join(outs, ", "))
			}
			return named{}, false
		}
	}
	names := maps.Clone(b.declared)
	for k := range b.streams {
		names[k] = true
	}
	delete(names, strings.TrimPrefix(m.path, "transforms.")) // not itself
	known := slices.Sorted(maps.Keys(names))
	hint := ""
	if s := closest(in, known); s != "" {
		hint = ", did you mean " + s + "?"
	}
	// Transforms may come in any order: the known names are all of them.
	b.e.add(m.get(key), m.field(key), "%q is not a source or transform%s (known: %s)", in, hint, strings.Join(known, ", "))
	return named{}, false
}

// unreadSideOutputs warns of side outputs that nothing reads: their records
// are dropped (and counted in the log), which is probably not what declaring
// them meant.
func (b *builder) unreadSideOutputs() {
	for _, so := range b.sides {
		ref := so.node + "." + so.name
		if !b.used[ref] {
			b.warnings = append(b.warnings, Warning{File: b.e.file, Line: so.at.Line, Field: so.field,
				Msg: fmt.Sprintf("nothing reads side output %s (a transform or sink would with input: %s), so its records are dropped and counted as with late_records: drop", ref, ref)})
		}
	}
}

// unreadTransforms warns of transforms that nothing reads, neither their
// output nor a side output of theirs: their results are computed and
// dropped, which is probably a sink's input misspelt or forgotten.
func (b *builder) unreadTransforms(m *mapping) {
	for _, name := range m.keys {
		read := b.used[name]
		for ref := range b.used {
			read = read || strings.HasPrefix(ref, name+".")
		}
		if !read {
			b.warnings = append(b.warnings, Warning{File: b.e.file, Line: m.line(name).Line, Field: m.field(name),
				Msg: fmt.Sprintf("nothing reads transform %s (a sink or transform would with input: %s), so its results are computed and dropped", name, name)})
		}
	}
}

// refFields are the fields through which a transform names its inputs.
var refFields = []string{"input", "left", "right"}

// transforms builds the transforms in dependency order: a transform may name
// one defined later in the file as its input.
func (b *builder) transforms(m *mapping) {
	todo := slices.Clone(m.keys)
	subs := map[string]*mapping{}
	for _, name := range todo {
		subs[name] = m.sub(name)
	}
	for len(todo) > 0 {
		progress := false
		for i := 0; i < len(todo); i++ {
			name := todo[i]
			sub := subs[name]
			waiting := false
			for _, f := range refFields {
				in := sub.vals[f]
				if in == nil || in.Kind != yaml.ScalarNode {
					continue
				}
				node, _, _ := strings.Cut(in.Value, ".") // a side output waits for its node
				if _, ready := b.streams[node]; !ready && slices.Contains(todo, node) {
					waiting = true
				}
			}
			if waiting {
				continue
			}
			b.transform(name, m.line(name), sub)
			todo = slices.Delete(todo, i, i+1)
			i--
			progress = true
		}
		if !progress {
			b.e.add(m.node, m.path, "transforms %s feed each other in a cycle", strings.Join(todo, ", "))
			for _, name := range todo {
				b.failed(name) // reported: their consumers need not say they are undefined
			}
			break
		}
	}
	m.done()
}

func (b *builder) transform(name string, k *yaml.Node, m *mapping) {
	b.id(name, k, m)
	switch typ := m.required("type"); typ {
	case "filter":
		b.filter(name, m)
	case "map":
		b.mapTransform(name, m)
	case "join":
		b.join(name, m)
	case "window":
		b.window(name, m)
	case "aggregate":
		b.aggregate(name, m)
	case "top_n":
		b.topN(name, m)
	case "window_top":
		b.windowTop(name, m)
	case "lookup_join":
		b.lookupJoin(name, m)
	case "over":
		b.over(name, m)
	default:
		m.unknownType("transform", typ, "aggregate, filter, join, lookup_join, map, over, top_n, window, window_top")
	}
	b.failed(name)
	m.done()
}
