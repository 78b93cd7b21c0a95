package config

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/ingest-engine/ingest/checkpoint"
	"github.com/ingest-engine/ingest/row"
	"github.com/ingest-engine/ingest/runtime"
	"github.com/ingest-engine/ingest/stream"
	"github.com/ingest-engine/ingest/watermark"
)

// This file holds what the sources of JSON records share: the record
// schema (declared under fields, or inferred from a sample), the event-time
// field, and the decoding of a JSON object into a row.

// sampleTimeout bounds how long a source without declared fields waits for
// a first record to infer its schema from.
const sampleTimeout = 10 * time.Second

// kinds are the field types a `fields:` declaration may name. A string
// field takes valid UTF-8 text only; a bytes field takes any bytes.
var kinds = map[string]row.Kind{"int": row.Int, "float": row.Float, "string": row.String, "bool": row.Bool, "time": row.Time, "bytes": row.Bytes}

// jsonSchema reads a JSON source's `fields: {name: type, ...}` and
// `event_time: {field: name}`. Without fields it calls sample for a first
// record and infers the schema from it. It returns the schema and the index
// of the event-time field (-1: the connector's own record time).
func (b *builder) jsonSchema(m *mapping, sample func() ([]byte, error)) (*row.Schema, int, bool) {
	et := m.sub("event_time")
	timeField := et.str("field", "")
	et.done()
	var schema *row.Schema
	if n := m.get("fields"); n != nil {
		schema = b.declaredFields(m.sub("fields"))
		if schema == nil {
			return nil, 0, false
		}
	} else {
		data, err := sample()
		if err != nil {
			b.e.add(m.node, m.path, "no fields declared and none could be inferred: %v; declare them, e.g. fields: {key: int, value: float, ts: time}", err)
			return nil, 0, false
		}
		opts := row.JSONOptions{}
		if timeField != "" {
			opts.TimeFields = []string{timeField}
		}
		if schema, err = opts.InferSchema(data); err != nil {
			b.e.add(m.node, m.path, "inferring fields from the first record %.200q: %v; declare them under fields", data, err)
			return nil, 0, false
		}
	}
	ti := -1
	if timeField != "" {
		ti = schema.Index(timeField)
		switch {
		case ti < 0:
			b.e.add(et.get("field"), et.field("field"), "no field %q (fields: %s)", timeField, strings.Join(schema.Names(), ", "))
			return nil, 0, false
		case schema.Fields[ti].Kind != row.Time && schema.Fields[ti].Kind != row.Int:
			b.e.add(et.get("field"), et.field("field"), "field %q is %v; an event time is a time (RFC 3339) or an int (epoch milliseconds)", timeField, schema.Fields[ti].Kind)
			return nil, 0, false
		}
	}
	return schema, ti, true
}

// declaredFields reads `fields: {name: type}` in order.
func (b *builder) declaredFields(m *mapping) *row.Schema {
	s := &row.Schema{}
	ok := true
	for _, k := range m.keys {
		t := m.str(k, "")
		kind, known := kinds[t]
		if !known {
			b.e.add(m.get(k), m.field(k), "unknown type %q (known: bool, bytes, float, int, string, time)", t)
			ok = false
			continue
		}
		s.Fields = append(s.Fields, row.Field{Name: k, Kind: kind})
	}
	if len(s.Fields) == 0 && ok {
		b.e.add(m.node, m.path, "declares no field")
		return nil
	}
	if !ok {
		return nil
	}
	return s
}

// rowDecoder turns a JSON object into a row of schema with its event time:
// the field ti, or the connector's record time when ti < 0.
func rowDecoder(schema *row.Schema, ti int) func(data []byte, recordTime int64) (row.Row, int64, error) {
	dec := row.NewJSONDecoder(schema, row.JSONOptions{})
	return func(data []byte, recordTime int64) (row.Row, int64, error) {
		r, err := dec.Decode(data)
		if err != nil {
			return nil, 0, err
		}
		if ti < 0 {
			return r, recordTime, nil
		}
		t, err := dec.EventTime(r, ti)
		if err != nil {
			return nil, 0, fmt.Errorf("event time: %w", err)
		}
		return r, t, nil
	}
}

// jsonSource is one JSON source type for buildJSONSource: how to get the
// JSON payload and the record's own time (Unix ns) of a message M, and how
// to build the connector's source over a decode function, raw for sampling
// or into rows.
type jsonSource[M any] struct {
	payload func(M) ([]byte, int64)
	raw     func(decode func(M) ([]byte, int64, error)) (stream.Source[[]byte], error)
	rows    func(decode func(M) (row.Row, int64, error)) (stream.Source[row.Row], error)
	// add adds the row source to the pipeline; nil means stream.From.
	add func(src stream.Source[row.Row]) stream.Stream[row.Row]
}

// buildJSONSource reads the record schema (declared, or inferred from a
// sampled first record), builds the row source and adds it as node name.
// requireTime refuses a source without event_time (records without a time
// of their own).
func buildJSONSource[M any](b *builder, name string, m *mapping, par stream.NodeOption, wm watermark.Strategy, requireTime bool, j jsonSource[M]) (named, bool) {
	policy, policyOK := b.badRecords(name, m)
	sampling := samplingPolicy(policy)
	sample := func() ([]byte, error) {
		raw, err := j.raw(func(msg M) ([]byte, int64, error) {
			data, t := j.payload(msg)
			if err := validJSONForSampling(sampling, data); err != nil {
				return nil, 0, err
			}
			return slices.Clone(data), t, nil
		})
		if err != nil {
			return nil, err
		}
		return sampleSource[[]byte](raw, sampleTimeout, sampling)
	}
	schema, ti, ok := b.jsonSchema(m, sample)
	if !ok {
		return named{}, false
	}
	if ti < 0 && requireTime {
		b.e.add(m.node, m.field("event_time"), "is required for this source: name the field with the event time, e.g. event_time: {field: ts}")
		return named{}, false
	}
	if !policyOK {
		return named{}, false
	}
	decode := rowDecoder(schema, ti)
	src, err := j.rows(func(msg M) (row.Row, int64, error) { return decode(j.payload(msg)) })
	if err != nil {
		b.e.add(m.node, m.path, "%v", err)
		return named{}, false
	}
	var s stream.Stream[row.Row]
	if j.add != nil {
		s = j.add(src)
	} else {
		s = stream.From(b.p, name, src, par)
	}
	s.Node().Describe += describeWatermark(wm)
	s = b.applyBadRecords(name, s, policy)
	return named{s: s, schema: schema}, true
}

// stopAtLatest reads `stop_at` ("latest" or absent); ok is false after an
// error.
func (m *mapping) stopAtLatest() (latest, ok bool) {
	switch s := m.str("stop_at", ""); s {
	case "":
		return false, true
	case "latest":
		return true, true
	default:
		m.e.add(m.get("stop_at"), m.field("stop_at"), "unknown value %q (known: latest)", s)
		return false, false
	}
}

// sampleSource opens subtask 0 of 1 of src outside any job and reads until
// it emits a first record or timeout passes: the first record's value. The
// subtask applies policy to bad records (when it has bad-record policies).
func sampleSource[T any](src stream.Source[T], timeout time.Duration, policy stream.BadRecordPolicy) (T, error) {
	var zero T
	out := &firstRecord[T]{}
	sub := src.NewSubtask()
	if br, ok := sub.(stream.BadRecordReader); ok {
		br.SetBadRecords(stream.BadRecordSetup{Policy: policy})
	}
	ctx := &runtime.Context{Task: checkpoint.TaskID{Operator: "sample"}, Parallelism: 1, MaxParallelism: 1}
	if err := sub.Open(ctx, runtime.EmitTo[T](out)); err != nil {
		return zero, fmt.Errorf("opening the source to sample it: %w", err)
	}
	defer sub.Close()
	deadline := time.Now().Add(timeout)
	for !out.got {
		res, err := sub.Read()
		if err != nil {
			return zero, fmt.Errorf("sampling: %w", err)
		}
		if out.got {
			break
		}
		if res.Exhausted {
			return zero, errors.New("the source has no records")
		}
		if time.Now().After(deadline) {
			return zero, fmt.Errorf("no record within %v", timeout)
		}
		time.Sleep(max(res.Wait, time.Millisecond))
	}
	return out.v, nil
}

// firstRecord is an Output keeping the first record it is given.
type firstRecord[T any] struct {
	v   T
	got bool
}

func (f *firstRecord[T]) Emit(r runtime.Records) error {
	if b := r.(runtime.Batch[T]); !f.got && len(b) > 0 {
		f.v, f.got = b[0].Value, true
	}
	return nil
}

// boolean reads a true/false field.
func (m *mapping) boolean(key string, def bool) bool {
	m.checkDefault(key, def)
	v, ok := m.scalar(key)
	if !ok {
		return def
	}
	switch v.Value {
	case "true":
		return true
	case "false":
		return false
	}
	m.fail(key, v, "%q is not true or false", v.Value)
	return def
}

// strList reads a list of strings (or one string as a list of one).
func (m *mapping) strList(key string) []string {
	v := m.get(key)
	if v == nil {
		return nil
	}
	if v.Kind == yaml.ScalarNode {
		return []string{v.Value}
	}
	if v.Kind != yaml.SequenceNode {
		m.fail(key, v, "must be a list of names")
		return nil
	}
	var out []string
	for _, c := range v.Content {
		if c.Kind != yaml.ScalarNode {
			m.fail(key, c, "must be a list of names")
			return nil
		}
		out = append(out, c.Value)
	}
	return out
}
