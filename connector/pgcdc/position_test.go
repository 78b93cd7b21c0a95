package pgcdc

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/jackc/pglogrepl"

	"github.com/ingest-engine/ingest/row"
)

// intTable is a table s.t keyed by a bigint id; pairTable one keyed by
// (n integer, name text), declared in the other order.
var (
	intTable = &Table{Schema: "s", Name: "t", Columns: []Column{
		{Name: "id", Type: "bigint", OID: oidInt8, Key: 1}, {Name: "v", Type: "text", OID: oidText}}, Key: []int{0}}
	pairTable = &Table{Schema: "s", Name: "pair", Columns: []Column{
		{Name: "name", Type: "text", OID: oidText, Key: 2}, {Name: "n", Type: "integer", OID: oidInt4, Key: 1}}, Key: []int{1, 0}}
)

func ints(v ...int64) []row.Value {
	out := make([]row.Value, len(v))
	for i, x := range v {
		out[i] = row.IntValue(x)
	}
	return out
}

// seg is a segment up to key upto (nil: the table's end) read at lsn.
func seg(t *testing.T, tb *Table, lsn pglogrepl.LSN, upto ...string) *segment {
	t.Helper()
	s := &segment{LSN: lsn}
	if upto != nil {
		s.Upto = upto
		k, err := tb.keyOf(upto)
		if err != nil {
			t.Fatal(err)
		}
		s.upto = k
	}
	return s
}

// TestSnapshotLSN finds the snapshot that read a key: the first segment
// whose Upto is at or after it, the last one (Upto nil) for the rest, and
// none past the last Upto of a table still being read.
func TestSnapshotLSN(t *testing.T) {
	done3 := []*segment{seg(t, intTable, 100, "10"), seg(t, intTable, 200, "20"), seg(t, intTable, 300)}
	reading := []*segment{seg(t, intTable, 100, "10"), seg(t, intTable, 200, "20")}
	for _, c := range []struct {
		name string
		segs []*segment
		key  int64
		want pglogrepl.LSN
		ok   bool
	}{
		{"below the first", done3, -5, 100, true},
		{"at the first upto", done3, 10, 100, true},
		{"after the first upto", done3, 11, 200, true},
		{"at the second upto", done3, 20, 200, true},
		{"in the rest", done3, 21, 300, true},
		{"far in the rest", done3, 1 << 62, 300, true},
		{"read so far", reading, 20, 200, true},
		{"not read yet", reading, 21, 0, false},
		{"no segments", nil, 1, 0, false},
		{"one whole segment", []*segment{{}}, 7, 0, true},
	} {
		got, ok := snapshotLSN(c.segs, ints(c.key))
		if got != c.want || ok != c.ok {
			t.Errorf("%s: snapshotLSN(%d) = %v, %v; want %v, %v", c.name, c.key, got, ok, c.want, c.ok)
		}
	}
	// Composite keys compare column by column: (2, "B") < (2, "a") <
	// (10, "") in byte order of the text and numeric order of the int.
	pairs := []*segment{seg(t, pairTable, 100, "2", "B"), seg(t, pairTable, 200, "2", "a"), seg(t, pairTable, 300)}
	for _, c := range []struct {
		n    int64
		name string
		want pglogrepl.LSN
	}{{2, "B", 100}, {2, "A", 100}, {1, "zzz", 100}, {2, "Ba", 200}, {2, "a", 200}, {2, "a ", 300}, {10, "", 300}, {3, "", 300}} {
		got, ok := snapshotLSN(pairs, []row.Value{row.IntValue(c.n), row.StringValue(c.name)})
		if !ok || got != c.want {
			t.Errorf("snapshotLSN((%d, %q)) = %v, %v; want %v", c.n, c.name, got, ok, c.want)
		}
	}
}

// TestPrune merges the segments of a table once every snapshot of it is at
// or before the last emitted commit or the confirmable End, and only then.
func TestPrune(t *testing.T) {
	p := position{Last: 250, End: 260, Tables: map[string][]*segment{
		"s.all_before":  {seg(t, intTable, 100, "10"), seg(t, intTable, 200)},
		"s.end_covers":  {seg(t, intTable, 100, "10"), seg(t, intTable, 260)},
		"s.one_after":   {seg(t, intTable, 100, "10"), seg(t, intTable, 261)},
		"s.reading":     {seg(t, intTable, 100, "10"), seg(t, intTable, 200, "20")},
		"s.not_started": nil,
		"s.merged":      {{}},
	}}
	p.prune()
	merged := []*segment{{}}
	want := map[string][]*segment{
		"s.all_before":  merged,
		"s.end_covers":  merged,
		"s.one_after":   {seg(t, intTable, 100, "10"), seg(t, intTable, 261)},
		"s.reading":     {seg(t, intTable, 100, "10"), seg(t, intTable, 200, "20")},
		"s.not_started": nil,
		"s.merged":      merged,
	}
	if !reflect.DeepEqual(p.Tables, want) {
		got, _ := json.Marshal(p.Tables)
		w, _ := json.Marshal(want)
		t.Errorf("pruned to %s, want %s", got, w)
	}
	// A merged table is done, and every key's snapshot is LSN 0: no change
	// is filtered any more.
	if !done(p.Tables["s.all_before"]) {
		t.Error("a merged table is not done")
	}
	if lsn, ok := snapshotLSN(p.Tables["s.all_before"], ints(1<<40)); !ok || lsn != 0 {
		t.Errorf("a merged table's key is read at %v, %v; want 0, true", lsn, ok)
	}
}

// TestPositionRoundTrip encodes a position and decodes it back, keys
// included, for the tables it names; tables the checkpoint has and the
// pipeline no longer captures are ignored.
func TestPositionRoundTrip(t *testing.T) {
	mt := int64(1700000000123456789)
	p := position{Slot: "slot_a", OIDs: map[string]uint32{"s.t": 16384, "s.pair": 4294967295}, Last: 0x16B3748, End: 0x16B3800, Stop: 0x2000000, MaxTime: &mt, Tables: map[string][]*segment{
		"s.t":     {seg(t, intTable, 100, "-9223372036854775808"), seg(t, intTable, 200, "9223372036854775807"), seg(t, intTable, 300)},
		"s.pair":  {seg(t, pairTable, 150, "2", "é'\"\\")},
		"s.other": {{Upto: []string{"not a key of s.t"}, LSN: 5}},
	}}
	b, err := p.encode()
	if err != nil {
		t.Fatal(err)
	}
	var raw map[string]any
	if err := json.Unmarshal(b, &raw); err != nil || raw["v"] != float64(1) {
		t.Fatalf("encoded %s (%v): want version 1", b, err)
	}
	got, err := decodePosition(b, "slot_a", []*Table{intTable, pairTable})
	if err != nil {
		t.Fatal(err)
	}
	if got.V != 1 || got.Slot != "slot_a" || !reflect.DeepEqual(got.OIDs, p.OIDs) || got.Last != p.Last || got.End != p.End || got.Stop != p.Stop || got.MaxTime == nil || *got.MaxTime != mt {
		t.Errorf("decoded %+v, want %+v", got, p)
	}
	for _, name := range []string{"s.t", "s.pair"} {
		if !reflect.DeepEqual(got.Tables[name], p.Tables[name]) {
			g, _ := json.Marshal(got.Tables[name])
			t.Errorf("%s: decoded segments %s, want %s", name, g, b)
		}
		for i, s := range got.Tables[name] {
			if !reflect.DeepEqual(s.upto, p.Tables[name][i].upto) {
				t.Errorf("%s segment %d: decoded key %v, want %v", name, i, s.upto, p.Tables[name][i].upto)
			}
		}
	}
	if got.Tables["s.t"][0].upto[0] != row.IntValue(-1<<63) || got.Tables["s.pair"][0].upto[1] != row.StringValue("é'\"\\") {
		t.Errorf("decoded keys %v, %v", got.Tables["s.t"][0].upto, got.Tables["s.pair"][0].upto)
	}
	// Without stop_at and max time they stay out of the encoding.
	empty := position{Slot: "x", Tables: map[string][]*segment{}}
	b, err = empty.encode()
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), "stop") || strings.Contains(string(b), "max_time") {
		t.Errorf("an empty position encodes as %s", b)
	}
}

// TestDecodePositionRefusals: a position of another slot, of another
// version, unreadable, or whose keys do not fit the tables' keys is an
// error naming the problem.
func TestDecodePositionRefusals(t *testing.T) {
	good := func(mod func(map[string]any)) []byte {
		m := map[string]any{"v": 1, "slot": "slot_a", "last": 1, "end": 2,
			"tables": map[string]any{"s.t": []any{map[string]any{"upto": []string{"10"}, "lsn": 5}, map[string]any{"upto": nil, "lsn": 6}}}}
		mod(m)
		b, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	if _, err := decodePosition(good(func(map[string]any) {}), "slot_a", []*Table{intTable}); err != nil {
		t.Fatalf("the good position: %v", err)
	}
	for _, c := range []struct {
		name string
		b    []byte
		slot string
		want []string
	}{
		{"other slot", good(func(map[string]any) {}), "slot_b", []string{`slot "slot_a", not "slot_b"`, "start without the checkpoint"}},
		{"newer version", good(func(m map[string]any) { m["v"] = 2 }), "slot_a", []string{"version 2", "reads version 1"}},
		{"no version", good(func(m map[string]any) { delete(m, "v") }), "slot_a", []string{"version 0"}},
		{"not JSON", []byte("{"), "slot_a", []string{"decoding the checkpoint's position"}},
		{"a key of two values", good(func(m map[string]any) {
			m["tables"] = map[string]any{"s.t": []any{map[string]any{"upto": []string{"1", "2"}, "lsn": 5}}}
		}), "slot_a", []string{"s.t", "a key of 2 values for the 1 primary key columns"}},
		{"a key that is not a bigint", good(func(m map[string]any) {
			m["tables"] = map[string]any{"s.t": []any{map[string]any{"upto": []string{"ten"}, "lsn": 5}}}
		}), "slot_a", []string{"s.t", "key column id", `"ten"`}},
		{"an empty key", good(func(m map[string]any) {
			m["tables"] = map[string]any{"s.t": []any{map[string]any{"upto": []string{}, "lsn": 5}}}
		}), "slot_a", []string{"s.t", "a key of 0 values"}},
	} {
		_, err := decodePosition(c.b, c.slot, []*Table{intTable})
		if err == nil {
			t.Errorf("%s: decoded %s without an error", c.name, c.b)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error %q does not mention %q", c.name, err, w)
			}
		}
	}
}

// TestStartedAndNeed: a position depends on its slot once a snapshot read
// under it (segments) or it streamed (End); the slot must then hold the
// WAL from End, or before streaming from the oldest snapshot's point.
func TestStartedAndNeed(t *testing.T) {
	for _, c := range []struct {
		name    string
		p       position
		started bool
		need    pglogrepl.LSN
	}{
		{"new", position{Tables: map[string][]*segment{"s.t": nil}}, false, 0},
		{"mid-snapshot", position{Tables: map[string][]*segment{"s.t": {seg(t, intTable, 300, "10")}, "s.u": {seg(t, intTable, 200, "5"), seg(t, intTable, 250)}}}, true, 200},
		{"streamed", position{End: 900, Tables: map[string][]*segment{"s.t": {seg(t, intTable, 300)}}}, true, 900},
	} {
		if got := c.p.started(); got != c.started {
			t.Errorf("%s: started() = %v, want %v", c.name, got, c.started)
		}
		if c.started {
			if got := c.p.need(); got != c.need {
				t.Errorf("%s: need() = %v, want %v", c.name, got, c.need)
			}
		}
	}
}
