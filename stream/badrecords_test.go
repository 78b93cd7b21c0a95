package stream

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ingest-engine/ingest/checkpoint"
	"github.com/ingest-engine/ingest/connector"
	"github.com/ingest-engine/ingest/runtime"
)

// captured is a slog handler that keeps the messages it is given.
type captured struct {
	mu   sync.Mutex
	msgs []string
}

func (c *captured) Enabled(context.Context, slog.Level) bool { return true }
func (c *captured) Handle(_ context.Context, r slog.Record) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	var b strings.Builder
	b.WriteString(r.Message)
	r.Attrs(func(a slog.Attr) bool {
		b.WriteString(" " + a.Key + "=" + a.Value.String())
		return true
	})
	c.msgs = append(c.msgs, b.String())
	return nil
}
func (c *captured) WithAttrs([]slog.Attr) slog.Handler { return c }
func (c *captured) WithGroup(string) slog.Handler      { return c }

// collect is an Output keeping every batch.
type collect struct{ batches []runtime.Records }

func (c *collect) Emit(r runtime.Records) error { c.batches = append(c.batches, r); return nil }

// subtaskCtx is the Context of subtask sub of source "src", with side output
// dead_letter connected to dl when dl is not nil.
func subtaskCtx(sub int, log *slog.Logger, dl runtime.Output) *runtime.Context {
	ctx := &runtime.Context{Task: checkpoint.TaskID{Operator: "src", Subtask: sub}, Parallelism: 2, Log: log}
	if dl != nil {
		connected[ctx] = dl
	}
	return ctx
}

// connected are the dead-letter outputs of the test contexts.
var connected = map[*runtime.Context]runtime.Output{}

func init() {
	sideOutputOf = func(ctx *runtime.Context, name string) runtime.Output {
		if name != DeadLetterOutput {
			return nil
		}
		return connected[ctx]
	}
}

func TestParseOnError(t *testing.T) {
	for in, want := range map[string]OnError{"": OnErrorFail, "fail": OnErrorFail, "skip": OnErrorSkip, "dead_letter": OnErrorDeadLetter} {
		if got, err := ParseOnError(in); err != nil || got != want {
			t.Errorf("ParseOnError(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"drop", "Fail", "dead-letter"} {
		if _, err := ParseOnError(in); err == nil || !strings.Contains(err.Error(), "fail, skip or dead_letter") {
			t.Errorf("ParseOnError(%q): %v, want an error listing the values", in, err)
		}
	}
}

// Fail returns the connector's failure, marked as a bad record's and with
// its message unchanged, and counts nothing; so does a nil handler (a
// source without a policy).
func TestBadRecordsFail(t *testing.T) {
	counts := &BadRecordCounts{}
	b, err := BadRecordSetup{Counts: counts}.Open(subtaskCtx(0, nil, nil), BadRecordTally{})
	if err != nil {
		t.Fatal(err)
	}
	failure := errors.New("topic t partition 3 offset 9: not JSON")
	for _, h := range []*BadRecords{b, nil} {
		got := h.Reject(BadRecord{Partition: "3", Offset: 9, Err: errors.New("not JSON")}, failure)
		var bad *BadRecordError
		if !errors.Is(got, failure) || got.Error() != failure.Error() || !errors.As(got, &bad) {
			t.Fatalf("Reject = %#v, want the failure marked as a *BadRecordError", got)
		}
		if want := map[bool]string{true: "", false: "src"}[h == nil]; bad.Source != want {
			t.Errorf("source %q, want %q", bad.Source, want)
		}
		if err := h.Flush(); err != nil {
			t.Fatal(err)
		}
		if h.Tally() != (BadRecordTally{}) {
			t.Fatalf("tally %+v after fail", h.Tally())
		}
	}
	if b.MaxRecordBytes() != DefaultMaxRecordBytes || (*BadRecords)(nil).MaxRecordBytes() != DefaultMaxRecordBytes {
		t.Fatalf("default max record bytes %d", b.MaxRecordBytes())
	}
	if counts.Total() != (BadRecordTally{}) {
		t.Fatalf("counts %+v after fail", counts.Total())
	}
}

// Skip counts every record, resuming from the restored tally; the counts
// of the node sum its subtasks; a warning names the failure at once and
// then at most every badRecordLogEvery, saying how many had none.
func TestBadRecordsSkipCountsAndRateLimitsWarnings(t *testing.T) {
	logs := &captured{}
	counts := &BadRecordCounts{}
	setup := BadRecordSetup{Policy: BadRecordPolicy{OnError: OnErrorSkip}, Counts: counts}
	b0, err := setup.Open(subtaskCtx(0, slog.New(logs), nil), BadRecordTally{Skipped: 5})
	if err != nil {
		t.Fatal(err)
	}
	b1, err := setup.Open(subtaskCtx(1, slog.New(logs), nil), BadRecordTally{Skipped: 2})
	if err != nil {
		t.Fatal(err)
	}
	if got := counts.Total(); got.Skipped != 7 {
		t.Fatalf("restored counts %+v, want 7 skipped", got)
	}
	clock := time.Unix(1000, 0)
	b0.now = func() time.Time { return clock }
	for i := range 25 {
		failure := errors.New("file f.jsonl:" + string(rune('a'+i)) + " bad")
		if err := b0.Reject(BadRecord{Partition: "f.jsonl", Line: int64(i)}, failure); err != nil {
			t.Fatalf("Reject under skip: %v", err)
		}
		clock = clock.Add(time.Second)
	}
	if err := b1.Reject(BadRecord{}, errors.New("x")); err != nil {
		t.Fatal(err)
	}
	if got := b0.Tally(); got.Skipped != 30 || got.DeadLettered != 0 {
		t.Fatalf("tally %+v, want 30 skipped", got)
	}
	if got := counts.Total(); got.Skipped != 33 {
		t.Fatalf("counts %+v, want 33 skipped (30 + 3)", got)
	}
	// 25 records a second apart: warnings at 0s, 10s and 20s from b0, one
	// from b1.
	var b0Logs []string
	for _, m := range logs.msgs {
		if strings.Contains(m, "subtask=0") {
			b0Logs = append(b0Logs, m)
		}
	}
	if len(b0Logs) != 3 {
		t.Fatalf("%d warnings from subtask 0, want 3:\n%s", len(b0Logs), strings.Join(b0Logs, "\n"))
	}
	if !strings.Contains(b0Logs[0], "f.jsonl:a bad") || !strings.Contains(b0Logs[0], "unlogged_since_last_warning=0") {
		t.Errorf("first warning %q: want the failure and no unlogged records", b0Logs[0])
	}
	if !strings.Contains(b0Logs[1], "f.jsonl:k bad") || !strings.Contains(b0Logs[1], "unlogged_since_last_warning=9") {
		t.Errorf("second warning %q: want record k and 9 unlogged before it", b0Logs[1])
	}
}

// Dead letters are queued with their position and cause, their bytes
// copied and cut to the size limit, and emitted by Flush as one batch; a
// custom DeadLetterBatch converts them.
func TestBadRecordsDeadLetter(t *testing.T) {
	out := &collect{}
	counts := &BadRecordCounts{}
	setup := BadRecordSetup{Policy: BadRecordPolicy{OnError: OnErrorDeadLetter, MaxRecordBytes: 4}, Counts: counts}
	b, err := setup.Open(subtaskCtx(1, nil, out), BadRecordTally{DeadLettered: 10})
	if err != nil {
		t.Fatal(err)
	}
	if !b.KeepsRaw() {
		t.Fatal("dead_letter does not keep raw bytes")
	}
	raw := []byte("abcdefgh")
	if err := b.Reject(BadRecord{Partition: "p", Offset: 7, Line: 3, Raw: raw, Err: errors.New("too long")}, errors.New("failure")); err != nil {
		t.Fatal(err)
	}
	if err := b.Reject(BadRecord{Partition: "q", Offset: 8, Raw: []byte("x"), Err: errors.New("bad")}, errors.New("failure")); err != nil {
		t.Fatal(err)
	}
	copy(raw, "ZZZZ") // the connector's buffer is reused
	if len(out.batches) != 0 {
		t.Fatal("emitted before Flush")
	}
	if err := b.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := b.Flush(); err != nil || len(out.batches) != 1 {
		t.Fatalf("second Flush: %v, %d batches; want nothing emitted again", err, len(out.batches))
	}
	got := out.batches[0].(runtime.Batch[DeadLetter])
	want := []DeadLetter{
		{Source: "src", Partition: "p", Offset: 7, Line: 3, Error: "too long", Raw: []byte("abcd")},
		{Source: "src", Partition: "q", Offset: 8, Error: "bad", Raw: []byte("x")},
	}
	if len(got) != len(want) {
		t.Fatalf("%d dead letters, want %d", len(got), len(want))
	}
	for i := range want {
		g := got[i].Value
		if g.Source != want[i].Source || g.Partition != want[i].Partition || g.Offset != want[i].Offset || g.Line != want[i].Line ||
			g.Error != want[i].Error || string(g.Raw) != string(want[i].Raw) || got[i].Time != 0 {
			t.Errorf("dead letter %d: %+v at time %d, want %+v at 0", i, g, got[i].Time, want[i])
		}
	}
	if got := counts.Total(); got.DeadLettered != 12 {
		t.Fatalf("counts %+v, want 12 dead-lettered", got)
	}

	conv := &collect{}
	setup.Policy.DeadLetterBatch = func(dl []DeadLetter) runtime.Records {
		var s runtime.Batch[string]
		for _, d := range dl {
			s = append(s, runtime.Record[string]{Value: d.Partition + "@" + d.Error})
		}
		return s
	}
	b2, err := setup.Open(subtaskCtx(0, nil, conv), BadRecordTally{})
	if err != nil {
		t.Fatal(err)
	}
	_ = b2.Reject(BadRecord{Partition: "r", Err: errors.New("e")}, errors.New("failure"))
	if err := b2.Flush(); err != nil {
		t.Fatal(err)
	}
	if s := conv.batches[0].(runtime.Batch[string]); len(s) != 1 || s[0].Value != "r@e" {
		t.Fatalf("converted batch %v", s)
	}
}

// A dead_letter policy whose output nothing consumes cannot open: its
// records would be lost.
func TestBadRecordsDeadLetterNeedsConsumer(t *testing.T) {
	_, err := BadRecordSetup{Policy: BadRecordPolicy{OnError: OnErrorDeadLetter}}.Open(subtaskCtx(0, nil, nil), BadRecordTally{})
	if err == nil || !strings.Contains(err.Error(), "would be lost") {
		t.Fatalf("Open: %v, want an error saying records would be lost", err)
	}
	if _, err := (BadRecordSetup{Policy: BadRecordPolicy{OnError: "drop"}}).Open(subtaskCtx(0, nil, nil), BadRecordTally{}); err == nil {
		t.Fatal("Open accepted on_error drop")
	}
	if _, err := (BadRecordSetup{Policy: BadRecordPolicy{MaxRecordBytes: -1}}).Open(subtaskCtx(0, nil, nil), BadRecordTally{}); err == nil {
		t.Fatal("Open accepted a negative size limit")
	}
}

// policySource is a test source whose subtasks record the setup they get.
type policySource struct {
	supports bool
	got      *[]BadRecordSetup
}

type policyReader struct {
	runtime.SourceSubtask[int]
	got *[]BadRecordSetup
}

func (r *policyReader) SetBadRecords(s BadRecordSetup) { *r.got = append(*r.got, s) }

type plainReader struct{ runtime.SourceSubtask[int] }

func (s policySource) NewSubtask() runtime.SourceSubtask[int] {
	if s.supports {
		return &policyReader{got: s.got}
	}
	return plainReader{}
}
func (policySource) Descriptor() connector.Descriptor {
	return connector.Descriptor{Capabilities: runtime.Capabilities{Replayable: true}}
}
func (policySource) Describe() string { return "test source" }

// OnBadRecords hands every subtask the policy and the node's counts,
// declares the dead-letter output, which Plan then requires to be read,
// and refuses sources without policies and streams that are not a
// source's.
func TestOnBadRecords(t *testing.T) {
	var got []BadRecordSetup
	p := New("bad")
	s := OnBadRecords(From[int](p, "src", policySource{supports: true, got: &got}), BadRecordPolicy{OnError: OnErrorDeadLetter})
	To(s, "out", Discard[int]())
	if _, err := p.Plan(); err == nil || !strings.Contains(err.Error(), "source src: on_error is dead_letter but nothing reads") {
		t.Fatalf("Plan without a dead-letter consumer: %v", err)
	}
	To(DeadLetters(s), "dlq", Discard[DeadLetter]())
	plan, err := p.Plan()
	if err != nil {
		t.Fatal(err)
	}
	var src *runtime.Node
	for _, n := range plan.Nodes {
		if n.ID == "src" {
			src = n
		}
	}
	if !strings.Contains(src.Describe, "on_error dead_letter") {
		t.Errorf("describe %q does not show the policy", src.Describe)
	}
	src.NewSource()
	src.NewSource()
	if len(got) != 2 {
		t.Fatalf("%d subtasks got a setup, want 2", len(got))
	}
	if got[0].Policy.OnError != OnErrorDeadLetter || got[0].Policy.MaxRecordBytes != 0 || got[0].Counts == nil || got[0].Counts != got[1].Counts {
		t.Fatalf("setup %+v: want dead_letter, the connector's limit (0) and the node's counts", got[0])
	}
	got[0].Counts.set(0, BadRecordTally{Skipped: 1, DeadLettered: 2})
	got[0].Counts.set(1, BadRecordTally{DeadLettered: 3})
	if c := p.BadRecordCounts(); len(c) != 1 || c["src"] != (BadRecordTally{Skipped: 1, DeadLettered: 5}) {
		t.Fatalf("BadRecordCounts = %v", c)
	}

	for name, build := range map[string]func(p *Pipeline){
		"no policies": func(p *Pipeline) { OnBadRecords(From[int](p, "src", policySource{}), BadRecordPolicy{}) },
		"not a source": func(p *Pipeline) {
			OnBadRecords(Map(From[int](p, "src", policySource{supports: true, got: &got}), "m", func(i int) int { return i }), BadRecordPolicy{})
		},
		"twice": func(p *Pipeline) {
			s := From[int](p, "src", policySource{supports: true, got: &got})
			OnBadRecords(OnBadRecords(s, BadRecordPolicy{}), BadRecordPolicy{})
		},
		"bad policy": func(p *Pipeline) {
			OnBadRecords(From[int](p, "src", policySource{supports: true, got: &got}), BadRecordPolicy{OnError: "ignore"})
		},
	} {
		p := New("bad")
		build(p)
		if _, err := p.Plan(); err == nil {
			t.Errorf("%s: Plan accepted it", name)
		} else {
			t.Logf("%s: %v", name, err)
		}
	}
}
