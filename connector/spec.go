package connector

import (
	"cmp"
	"fmt"
	"slices"
	"sync"
)

// This file is the registry of the connectors' YAML specifications. Each
// built-in connector registers the Spec of its source and sink types from
// its own package (an init function beside its code); package config reads a
// pipeline file's connector mappings against the registered specs (a field
// not declared is an error, the type names come from here) and
// docs/yaml.md's connector reference is generated from them.

// Role says whether a connector type reads records (a source) or writes them
// (a sink). One type name may have both, as kafka and file do.
type Role string

const (
	// RoleSource is a connector under `sources:`.
	RoleSource Role = "source"
	// RoleSink is a connector under `sinks:`.
	RoleSink Role = "sink"
)

// FieldKind is the YAML shape of a field's value.
type FieldKind string

// The field kinds. A Duration is Go syntax (250ms, 1s, 5m); a Size is a
// byte count with an optional unit (512MiB, 100MB); a List is a YAML
// sequence of scalars, or one scalar as a list of one; a Mapping is a nested
// mapping: of the Field's own Fields, or of names the user chooses when it
// declares none.
const (
	String   FieldKind = "string"
	Int      FieldKind = "int"
	Float    FieldKind = "float"
	Bool     FieldKind = "bool"
	Duration FieldKind = "duration"
	Size     FieldKind = "size"
	Time     FieldKind = "time"
	List     FieldKind = "list"
	Mapping  FieldKind = "mapping"
)

// Field is one field of a connector type's YAML mapping.
//
// Invariant: Default is the value the connector uses when the field is
// absent, written as YAML would write it; "" means the field has no default
// value (absent means what Doc says, e.g. "unbounded"). Package config checks
// every default it applies against this one, so the documented default is
// the effective one.
type Field struct {
	Name     string
	Kind     FieldKind
	Required bool
	Default  string
	// Values, when set, are every value the field accepts.
	Values []string
	// Doc is one or two sentences of Markdown.
	Doc string
	// Fields are a Mapping's fields.
	Fields []Field
}

// Spec is the YAML specification of one connector type in one role: the
// fields its mapping takes besides the ones every node has (type,
// parallelism, and a sink's input).
type Spec struct {
	Role Role
	// Type is the name in YAML's `type:`.
	Type string
	// Summary is a paragraph of Markdown: what the connector reads or
	// writes, its replay position or commit, and its delivery guarantee.
	Summary string
	Fields  []Field
	// Example is a node of this type in YAML, without its name: the
	// reference shows it and a test loads it. A sink's reads `input: events`.
	Example string
}

// registry holds the registered specs by role and type.
var registry struct {
	sync.Mutex
	specs map[Role]map[string]Spec
}

// Register adds a connector type's spec. It is meant for init functions: a
// spec without role or type, or a second spec of one role and type, is a
// programming error and panics at program start.
func Register(s Spec) {
	if (s.Role != RoleSource && s.Role != RoleSink) || s.Type == "" {
		panic(fmt.Sprintf("connector.Register: spec %q has role %q: need a type and role source or sink", s.Type, s.Role))
	}
	registry.Lock()
	defer registry.Unlock()
	if registry.specs == nil {
		registry.specs = map[Role]map[string]Spec{}
	}
	if registry.specs[s.Role] == nil {
		registry.specs[s.Role] = map[string]Spec{}
	}
	if _, dup := registry.specs[s.Role][s.Type]; dup {
		panic(fmt.Sprintf("connector.Register: %s type %q registered twice", s.Role, s.Type))
	}
	registry.specs[s.Role][s.Type] = s
}

// Unregister removes a registered spec: for a test that adds a connector
// type for its own duration.
func Unregister(role Role, typ string) {
	registry.Lock()
	defer registry.Unlock()
	delete(registry.specs[role], typ)
}

// Lookup returns the registered spec of a role and type.
func Lookup(role Role, typ string) (Spec, bool) {
	registry.Lock()
	defer registry.Unlock()
	s, ok := registry.specs[role][typ]
	return s, ok
}

// Specs returns every registered spec of role, sorted by type.
func Specs(role Role) []Spec {
	registry.Lock()
	defer registry.Unlock()
	out := make([]Spec, 0, len(registry.specs[role]))
	for _, s := range registry.specs[role] {
		out = append(out, s)
	}
	slices.SortFunc(out, func(a, b Spec) int { return cmp.Compare(a.Type, b.Type) })
	return out
}

// Types returns the registered type names of role, sorted.
func Types(role Role) []string {
	var out []string
	for _, s := range Specs(role) {
		out = append(out, s.Type)
	}
	return out
}

// The fields several connectors share, declared once so they mean the same
// on each.

// WatermarkField is the `watermark` block of a source that tracks event
// times (package watermark).
var WatermarkField = Field{Name: "watermark", Kind: Mapping, Doc: "How the source derives its watermark; see [Event time and watermarks](#event-time-and-watermarks).", Fields: []Field{
	{Name: "max_delay", Kind: Duration, Default: "0s", Doc: "Records up to this far behind the newest one of their split are on time."},
	{Name: "idle_timeout", Kind: Duration, Default: "0s", Doc: "A split with no records this long, that the source then sees with nothing to read, stops holding the watermark back; 0: never."},
}}

// StopAtField is `stop_at` of a source that can end at the input's end.
func StopAtField(end string) Field {
	return Field{Name: "stop_at", Kind: String, Values: []string{"latest"}, Doc: "`latest`: read up to " + end + " at the job's first start, then end. Absent: never end."}
}

// RecordFields are the fields of a source that decodes its records into
// rows: their schema, event time and bad-input policy. eventTime says what
// the event time is without `event_time` ("" when the field is required).
func RecordFields(eventTime string) []Field {
	et := Field{Name: "event_time", Kind: Mapping, Doc: "The field holding the event time: a `time` (RFC 3339 or epoch milliseconds) or an `int` (epoch milliseconds).", Fields: []Field{
		{Name: "field", Kind: String, Doc: "The field's name."},
	}}
	if eventTime == "" {
		et.Required = true
	} else {
		et.Doc += " Absent: " + eventTime + "."
	}
	return []Field{
		{Name: "fields", Kind: Mapping, Doc: "The record's fields and their types in order (`{key: int, value: float, ts: time}`; types: `int`, `float`, `string`, `bool`, `time`, `bytes`). Absent: inferred from the first record when the pipeline is loaded."},
		et,
		{Name: "on_error", Kind: String, Default: "fail", Values: []string{"fail", "skip", "dead_letter"}, Doc: "What a bad record does: stop the job, be skipped (counted), or go to the side output `<source>.dead_letter`; see [Bad input](#bad-input-on_error-and-dead-letters)."},
		{Name: "max_record_bytes", Kind: Int, Default: "1048576", Doc: "A longer record is a bad record."},
		{Name: "max_future", Kind: Duration, Default: "1h", Doc: "An event time further ahead of the wall clock is a bad record; 0: no limit."},
	}
}
