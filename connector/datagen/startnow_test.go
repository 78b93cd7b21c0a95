package datagen_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/ingest-engine/ingest/checkpoint"
	"github.com/ingest-engine/ingest/connector/datagen"
	"github.com/ingest-engine/ingest/runtime"
)

// clockAt returns a runtime.Context clock that reads t.
func clockAt(t time.Time) func() time.Time { return func() time.Time { return t } }

// openAt opens subtask s of p of src with the wall clock at now, restored
// from restored (nil: fresh) or, at another parallelism, union.
func openAt(t *testing.T, src *datagen.Source[datagen.Event], s, p int, now time.Time, restored []byte, union [][]byte) (subtask, error) {
	t.Helper()
	out := &collector{}
	var state *checkpoint.SubtaskState
	if restored != nil {
		state = &checkpoint.SubtaskState{Task: checkpoint.TaskID{Operator: "events", Subtask: s}, Inline: restored}
	}
	ctx := subtaskContext(s, p, out, state, union)
	ctx.Clock = clockAt(now)
	st := runtime.EraseSource(src.NewSubtask())
	err := st.Open(ctx)
	t.Cleanup(func() { _ = st.Close() })
	return subtask{src: st, out: out}, err
}

// readOnce reads one batch and returns the position after it.
func readOnce(t *testing.T, st subtask) []byte {
	t.Helper()
	if _, err := st.src.Read(); err != nil {
		t.Fatal(err)
	}
	pos, err := st.src.Position()
	if err != nil {
		t.Fatal(err)
	}
	return pos
}

// checkTimes checks that every record has event time start + id*step.
func checkTimes(t *testing.T, what string, recs []runtime.Record[datagen.Event], start time.Time, step time.Duration) {
	t.Helper()
	if len(recs) == 0 {
		t.Fatalf("%s: no records", what)
	}
	for _, r := range recs {
		if want := start.UnixNano() + r.Value.ID*int64(step); r.Time != want {
			t.Fatalf("%s: record %d at %v, want %v", what, r.Value.ID, time.Unix(0, r.Time).UTC(), time.Unix(0, want).UTC())
		}
	}
}

// start_time: now takes the wall clock when the job first starts, for every
// subtask alike; an attempt restarted before any checkpoint keeps it, and a
// restore from a checkpoint keeps it too, in a new Source (a new process)
// whose clock reads another time: the replayed records have the event times
// they had.
func TestStartNowIsKeptAcrossRestarts(t *testing.T) {
	cfg := datagen.Config{Count: 5000, Keys: 7, StartNow: true, EventInterval: time.Millisecond}
	t1 := time.Date(2027, 3, 4, 5, 6, 7, 123456789, time.UTC)
	t2, t3 := t1.Add(time.Hour), t1.Add(48*time.Hour)

	src := newEvents(t, cfg)
	s0, err := openAt(t, src, 0, 2, t1, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	s1, err := openAt(t, src, 1, 2, t2, nil, nil) // a later clock: the first subtask's start stands
	if err != nil {
		t.Fatal(err)
	}
	pos0, pos1 := readOnce(t, s0), readOnce(t, s1)
	checkTimes(t, "first start", append(s0.out.records(), s1.out.records()...), t1, time.Millisecond)
	var decoded struct {
		Next  int64
		Start string
	}
	if err := json.Unmarshal(pos0, &decoded); err != nil || decoded.Start != "2027-03-04T05:06:07.123456789Z" {
		t.Fatalf("position %s: %v; want the start written in it", pos0, err)
	}

	// An attempt restarted before a checkpoint: fresh positions, same start.
	again, err := openAt(t, src, 0, 2, t2, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	readOnce(t, again)
	checkTimes(t, "restart without a checkpoint", again.out.records(), t1, time.Millisecond)

	// A new process restored from the checkpoint, two days later, at the
	// same and at another parallelism.
	for _, c := range []struct {
		name  string
		p     int
		union bool
	}{{"same parallelism", 2, false}, {"rescaled to 3", 3, true}} {
		later := newEvents(t, cfg)
		var recs []runtime.Record[datagen.Event]
		for s := range c.p {
			var st subtask
			if c.union {
				st, err = openAt(t, later, s, c.p, t3, nil, [][]byte{pos0, pos1})
			} else {
				st, err = openAt(t, later, s, c.p, t3, [][]byte{pos0, pos1}[s], nil)
			}
			if err != nil {
				t.Fatalf("%s: %v", c.name, err)
			}
			drain(t, st)
			recs = append(recs, st.out.records()...)
		}
		checkTimes(t, c.name, recs, t1, time.Millisecond)
		if got := int64(len(recs) + len(s0.out.records()) + len(s1.out.records())); got != cfg.Count {
			t.Errorf("%s: %d records in all, want %d", c.name, got, cfg.Count)
		}
	}
}

// A position written without start_time: now has no start; restored with
// it, the start is chosen then, so that the next record is at the wall
// clock. Without now, positions keep their format and a restored start is
// ignored: start_time applies.
func TestStartNowAndFixedStartPositions(t *testing.T) {
	t1 := time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC)
	fixed := newEvents(t, datagen.Config{Count: 100})
	st, err := openAt(t, fixed, 0, 1, t1, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	pos := readOnce(t, st)
	if strings.Contains(string(pos), "start") {
		t.Fatalf("position without now: %s", pos)
	}
	now := newEvents(t, datagen.Config{Count: 200, StartNow: true})
	st, err = openAt(t, now, 0, 1, t1, pos, nil)
	if err != nil {
		t.Fatal(err)
	}
	drain(t, st)
	recs := st.out.records()
	if recs[0].Value.ID != 100 || recs[0].Time != t1.UnixNano() {
		t.Fatalf("now after a fixed start: first record %d at %v, want 100 at %v", recs[0].Value.ID, time.Unix(0, recs[0].Time).UTC(), t1)
	}
	checkTimes(t, "now after a fixed start", recs, t1.Add(-100*time.Millisecond), time.Millisecond)

	withStart := readOnceFresh(t, datagen.Config{Count: 100, StartNow: true}, t1)
	st, err = openAt(t, newEvents(t, datagen.Config{Count: 200}), 0, 1, t1.Add(time.Hour), withStart, nil)
	if err != nil {
		t.Fatal(err)
	}
	drain(t, st)
	checkTimes(t, "a fixed start after now", st.out.records(), datagen.DefaultStartTime, time.Millisecond)
}

// readOnceFresh opens one subtask of cfg at now and returns its position
// after one read.
func readOnceFresh(t *testing.T, cfg datagen.Config, now time.Time) []byte {
	t.Helper()
	st, err := openAt(t, newEvents(t, cfg), 0, 1, now, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	return readOnce(t, st)
}

// Positions that disagree on the start are refused, naming it; so is now
// together with a start time, and a start the engine cannot represent.
func TestStartNowErrors(t *testing.T) {
	cfg := datagen.Config{Count: 100, StartNow: true}
	a := readOnceFresh(t, cfg, time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC))
	b := readOnceFresh(t, cfg, time.Date(2028, 1, 1, 0, 0, 0, 0, time.UTC))
	// b is subtask 0's position; as subtask 1's it needs next 1.
	b = []byte(strings.Replace(string(b), `"next":`, `"lanes":[{"stride":2,"next":1}],"x":`, 1))
	if _, err := openAt(t, newEvents(t, cfg), 0, 3, time.Now(), nil, [][]byte{a, b}); err == nil || !strings.Contains(err.Error(), "another start time") {
		t.Errorf("union of two starts: %v", err)
	}
	src := newEvents(t, cfg)
	if _, err := openAt(t, src, 0, 1, time.Now(), a, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := openAt(t, src, 0, 1, time.Now(), readOnceFresh(t, cfg, time.Date(2029, 1, 1, 0, 0, 0, 0, time.UTC)), nil); err == nil ||
		!strings.Contains(err.Error(), "differs from 2027-01-01 00:00:00 +0000 UTC") {
		t.Errorf("a second start in one source: %v", err)
	}
	if _, err := datagen.Events(datagen.Config{StartNow: true, StartTime: time.Unix(5, 0)}); err == nil || !strings.Contains(err.Error(), "start_time is both now and") {
		t.Errorf("now and a start time: %v", err)
	}
	late := datagen.Config{Count: 1 << 43, StartNow: true}
	if _, err := openAt(t, newEvents(t, late), 0, 1, time.Unix(0, 1<<62), nil, nil); err == nil || !strings.Contains(err.Error(), "start_time now") {
		t.Errorf("a start too late for the count: %v", err)
	}
	if _, err := openAt(t, newEvents(t, cfg), 0, 1, time.Now(), []byte(`{"next":0,"start":"yesterday"}`), nil); err == nil || !strings.Contains(err.Error(), "start") {
		t.Errorf("a garbled start: %v", err)
	}
}
