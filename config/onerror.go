package config

import (
	"encoding/base64"
	"encoding/json"
	"fmt"

	"github.com/ingest-engine/ingest/row"
	"github.com/ingest-engine/ingest/runtime"
	"github.com/ingest-engine/ingest/stream"
)

// This file reads a source's bad-input policy (on_error, max_record_bytes,
// max_future; see stream.OnBadRecords) and wires its dead-letter output, which
// transforms and sinks read as input: <source>.dead_letter.

// deadLetterSchema is the schema of the rows of <source>.dead_letter. They
// have no event-time field (their record time is 0).
var deadLetterSchema = &row.Schema{Fields: []row.Field{
	{Name: "source", Kind: row.String},
	{Name: "partition", Kind: row.String},
	{Name: "offset", Kind: row.Int},
	{Name: "line", Kind: row.Int},
	{Name: "error", Kind: row.String},
	{Name: "raw", Kind: row.String},
}}

// deadLetterRows turns dead letters into rows of deadLetterSchema. raw is
// base64 (standard, padded): exact for any bytes, and safe in every sink
// (JSON strings must be UTF-8, PostgreSQL text refuses NUL bytes).
func deadLetterRows(dl []stream.DeadLetter) runtime.Records {
	b := make(runtime.Batch[row.Row], len(dl))
	for i, d := range dl {
		b[i] = runtime.Record[row.Row]{Value: row.Row{
			row.StringValue(d.Source),
			row.StringValue(d.Partition),
			row.IntValue(d.Offset),
			row.IntValue(d.Line),
			row.StringValue(d.Error),
			row.StringValue(base64.StdEncoding.EncodeToString(d.Raw)),
		}}
	}
	return b
}

// badRecords reads the on_error, max_record_bytes and max_future fields of
// source name (ok is false after an error, already reported). With
// dead_letter it declares the side output name.dead_letter; once the file
// is built it checks that something reads that output, and that nothing
// reads it without dead_letter.
func (b *builder) badRecords(name string, m *mapping) (policy stream.BadRecordPolicy, ok bool) {
	policy = stream.BadRecordPolicy{DeadLetterBatch: deadLetterRows}
	ok = true
	at, field := m.get("on_error"), m.field("on_error")
	if v := m.str("on_error", string(stream.OnErrorFail)); v != "" {
		o, err := stream.ParseOnError(v)
		if err != nil {
			m.fail("on_error", at, "unknown value %q (known: dead_letter, fail, skip)", v)
			ok = false
		}
		policy.OnError = o
	}
	if policy.OnError == "" {
		policy.OnError = stream.OnErrorFail
	}
	limit := m.int("max_record_bytes", stream.DefaultMaxRecordBytes)
	m.positive("max_record_bytes", limit > 0)
	if limit > 0 {
		policy.MaxRecordBytes = int(limit)
	} else {
		ok = false
	}
	// max_future: 0 turns the check off (stream.NoMaxFuture).
	future := m.duration("max_future", stream.DefaultMaxFuture)
	m.nonNegative("max_future", future >= 0)
	switch {
	case future == 0:
		policy.MaxFuture = stream.NoMaxFuture
	case future > 0:
		policy.MaxFuture = future
	default:
		ok = false
	}
	ref := name + "." + stream.DeadLetterOutput
	if policy.OnError == stream.OnErrorDeadLetter {
		b.sides = append(b.sides, sideOutput{node: name, name: stream.DeadLetterOutput, at: at, field: field})
		b.failed(ref) // until the source is built
	}
	if !ok {
		return policy, false
	}
	if at == nil {
		at, field = m.node, m.path
	}
	b.e.atEnd(func() {
		read := b.used[ref]
		switch {
		case policy.OnError == stream.OnErrorDeadLetter && !read:
			b.e.add(at, field, "dead_letter, but nothing reads %s: its bad records would be lost; give a sink (or transform) input: %s", ref, ref)
		case policy.OnError != stream.OnErrorDeadLetter && read:
			b.e.add(at, field, "%s is read as an input, but on_error is %s, so the source sends nothing there; set on_error: dead_letter", ref, policy.OnError)
		}
	})
	return policy, true
}

// applyBadRecords sets policy on source name's stream s and, with
// dead_letter, makes name.dead_letter a stream of deadLetterSchema rows.
func (b *builder) applyBadRecords(name string, s stream.Stream[row.Row], policy stream.BadRecordPolicy) stream.Stream[row.Row] {
	s = stream.OnBadRecords(s, policy)
	if policy.OnError == stream.OnErrorDeadLetter {
		b.streams[name+"."+stream.DeadLetterOutput] = named{s: stream.SideOutput[row.Row](s, stream.DeadLetterOutput), schema: deadLetterSchema}
	}
	return s
}

// samplingPolicy is the policy of the source that samples a first record
// for schema inference: it skips what the pipeline would not fail on, so a
// bad first record does not decide the schema (or stop inference) when the
// source tolerates bad records.
func samplingPolicy(p stream.BadRecordPolicy) stream.BadRecordPolicy {
	s := stream.BadRecordPolicy{OnError: stream.OnErrorFail, MaxRecordBytes: p.MaxRecordBytes, MaxFuture: p.MaxFuture}
	if p.OnError != stream.OnErrorFail {
		s.OnError = stream.OnErrorSkip
	}
	return s
}

// validJSONForSampling rejects a sample that is not JSON when the policy
// tolerates bad records, so the sampling source skips it.
func validJSONForSampling(p stream.BadRecordPolicy, data []byte) error {
	if p.OnError != stream.OnErrorFail && !json.Valid(data) {
		return fmt.Errorf("not valid JSON")
	}
	return nil
}
