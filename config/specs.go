package config

import (
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/ingest-engine/ingest/connector"
)

// This file reads connector mappings against the connectors' registered
// specs (connector.Register): a builder may read only the fields its spec
// declares, and the default it applies must be the spec's, so the generated
// reference (docs/yaml.md) says what the builders do.

// declared are the fields a connector's mapping, or a nested mapping of it,
// may read.
type declared struct {
	// what names the mapping in internal errors: "kafka source",
	// "kafka source watermark".
	what   string
	fields []connector.Field
	// node are the fields every node of the role has (type, parallelism,
	// input), read by the builder outside the spec.
	node []string
}

// declare returns the declared fields of spec, with the node fields.
func declare(spec connector.Spec, node ...string) *declared {
	return &declared{what: spec.Type + " " + string(spec.Role), fields: spec.Fields, node: node}
}

// field returns the declared field key.
func (d *declared) field(key string) (connector.Field, bool) {
	i := slices.IndexFunc(d.fields, func(f connector.Field) bool { return f.Name == key })
	if i < 0 {
		return connector.Field{}, false
	}
	return d.fields[i], true
}

// sub returns the declared fields of the nested mapping key: nil (any name)
// for a mapping whose names the user chooses, as `fields:`.
func (d *declared) sub(key string) *declared {
	if d == nil {
		return nil
	}
	f, ok := d.field(key)
	if !ok || len(f.Fields) == 0 {
		return nil
	}
	return &declared{what: d.what + " " + key, fields: f.Fields}
}

// internal reports a builder that disagrees with its connector's spec. It is
// a defect of this program, not of the file, and says so.
func (m *mapping) internal(key, format string, args ...any) {
	m.e.add(m.node, m.field(key), "internal error, please report it: the %s %s", m.decl.what, fmt.Sprintf(format, args...))
}

// checkDeclared reports a read of a field the connector's spec does not
// declare: the field would work but be missing from the reference.
func (m *mapping) checkDeclared(key string) {
	if m.decl == nil || slices.Contains(m.decl.node, key) {
		return
	}
	if _, ok := m.decl.field(key); !ok {
		m.internal(key, "builder reads field %q, which its connector.Spec does not declare", key)
	}
}

// checkRequired reports a required field the spec does not mark Required.
func (m *mapping) checkRequired(key string) {
	if m.decl == nil {
		return
	}
	if f, ok := m.decl.field(key); ok && !f.Required {
		m.internal(key, "builder requires field %q, which its connector.Spec does not mark required", key)
	}
}

// checkDefault reports a default the builder applies that is not the one
// its spec declares (see connector.Field).
func (m *mapping) checkDefault(key string, def any) {
	if m.decl == nil {
		return
	}
	f, ok := m.decl.field(key)
	if !ok {
		return
	}
	if !sameDefault(f.Default, def) {
		m.internal(key, "builder applies the default %v to field %q, where its connector.Spec declares %q", def, key, f.Default)
	}
}

// sameDefault says whether spec, a Field.Default, is the value def. An
// empty spec matches the zero value only.
func sameDefault(spec string, def any) bool {
	switch d := def.(type) {
	case string:
		return spec == d
	case int64:
		if spec == "" {
			return d == 0
		}
		n, err := parseSize(spec) // a plain integer, or a size with a unit
		return err == nil && n == d
	case float64:
		if spec == "" {
			return d == 0
		}
		f, err := strconv.ParseFloat(spec, 64)
		return err == nil && f == d
	case time.Duration:
		if spec == "" {
			return d == 0
		}
		v, err := time.ParseDuration(spec)
		return err == nil && v == d
	case bool:
		if spec == "" {
			return !d
		}
		v, err := strconv.ParseBool(spec)
		return err == nil && v == d
	}
	return false
}
