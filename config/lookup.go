package config

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/ingest-engine/ingest/operator/lookup"
	"github.com/ingest-engine/ingest/row"
	"github.com/ingest-engine/ingest/runtime"
)

// This file builds the lookup_join transform: a stream joined, record by
// record, with a bounded table of JSON lines held whole in memory by every
// subtask (operator/lookup), SQL's JOIN t FOR SYSTEM_TIME AS OF PROCTIME().

// lookupJoin builds `type: lookup_join`: input, table (path, fields), on
// (left: a field or expression of the input, right: a field of the table)
// and select (left.<field>, right.<field>, left.*, right.*, key), as a
// join's.
func (b *builder) lookupJoin(name string, m *mapping) {
	in, ok := b.input(m)
	ok = ok && b.appendOnly(m, "input", "a lookup_join", in)
	par := b.parallelism(m)
	tm := m.sub("table")
	path := b.path(tm.required("path"))
	var schema *row.Schema
	if tm.get("fields") == nil {
		b.e.add(tm.node, tm.field("fields"), "is required: the table's fields and types, e.g. fields: {key: int, value: string}")
	} else {
		schema = b.declaredFields(tm.sub("fields"))
	}
	tm.done()
	on := m.sub("on")
	leftRef, rightRef := on.required("left"), on.required("right")
	on.done()
	// A field given but empty is as wrong as one missing.
	for _, f := range []struct {
		m    *mapping
		key  string
		what string
	}{{tm, "path", "the table's file of JSON lines"}, {on, "left", "a field or an expression of the input"}, {on, "right", "a field of the table"}} {
		if v := f.m.get(f.key); v != nil && strings.TrimSpace(f.m.str(f.key, "")) == "" {
			b.e.add(v, f.m.field(f.key), "is empty: want %s", f.what)
			ok = false
		}
	}
	if !ok || schema == nil || path == "" || leftRef == "" || rightRef == "" {
		m.has("select")
		return
	}
	if _, err := os.Stat(path); err != nil {
		b.e.add(tm.get("path"), tm.field("path"), "the table: %v", err)
		m.has("select")
		return
	}
	tk := schema.Index(strings.TrimSpace(rightRef))
	if tk < 0 {
		b.e.add(on.get("right"), on.field("right"), "the table has no field %q (fields: %s)", rightRef, strings.Join(schema.Names(), ", "))
		m.has("select")
		return
	}
	kc, ok := b.keyColumn(name+"-key", "key of lookup join "+name, on.get("left"), on.field("left"), in)
	if !ok {
		m.has("select")
		return
	}
	key, keyKind := kc.index, kc.kind
	if tkKind := schema.Fields[tk].Kind; tkKind != keyKind || keyKind == row.Float {
		msg := fmt.Sprintf("the input's key is %s and the table's field %s is %s: they must have one type", keyKind, schema.Fields[tk].Name, tkKind)
		if keyKind == row.Float || tkKind == row.Float {
			msg = "a float key is refused (NaN and -0 would match by their bits, not as numbers compare): look up an int or a string"
		}
		b.e.add(on.get("right"), on.field("right"), "%s", msg)
		m.has("select")
		return
	}
	sel, out := b.joinSelect(m, [2]named{in, {schema: schema}}, keyKind)
	if out == nil {
		return
	}
	load := tableLoader(name, path, schema, tk)
	joined := lookup.Join(kc.s, name, lookup.Config{
		Load: load,
		Key:  key,
		Output: func(l, t row.Row) row.Row {
			return pairRow(make(row.Row, len(sel)), sel, l[key], l, t)
		},
	}, par)
	joined.Node().Describe = fmt.Sprintf("lookup join on %s = table.%s, table %s (JSON lines, read whole by every subtask when it opens)",
		oneLine(leftRef), schema.Fields[tk].Name, path)
	b.caveats = append(b.caveats, caveat{node: name, line: m.node.Line,
		msg: fmt.Sprintf("lookup join %s reads table %s when each subtask starts: records replayed after a restore are joined with the table as it is then, so output may differ on replay", runtime.NodeName(name, ""), path)})
	b.streams[name] = named{s: joined, schema: out}
}

// tableLoader returns the lookup table's loader: each call (each subtask
// as it opens) reads the file of JSON lines at path anew into rows of
// schema, grouped by field key, so that a subtask restored after the file
// changed joins with what it holds then. Nothing is shared between
// subtasks: each holds its own copy.
func tableLoader(name, path string, schema *row.Schema, key int) func() (*lookup.Table, error) {
	return func() (*lookup.Table, error) {
		t, err := readTable(path, schema, key)
		if err != nil {
			return nil, fmt.Errorf("table of %s: %w", name, err)
		}
		return t, nil
	}
}

// readTable reads a file of JSON lines (blank lines skipped) into a table.
// A line that is no JSON object of schema's fields is an error naming the
// file and line.
func readTable(path string, schema *row.Schema, key int) (*lookup.Table, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	dec := row.NewJSONDecoder(schema, row.JSONOptions{})
	r := bufio.NewReaderSize(f, 1<<16)
	var rows []row.Row
	for line := 1; ; line++ {
		data, err := r.ReadBytes('\n')
		if len(bytes.TrimSpace(data)) > 0 {
			v, derr := dec.Decode(bytes.TrimSpace(data))
			if derr != nil {
				return nil, fmt.Errorf("%s:%d: %w", path, line, derr)
			}
			rows = append(rows, v)
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %w", path, line, err)
		}
	}
	return lookup.NewTable(rows, key), nil
}
