package window_test

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ingest-engine/ingest/checkpoint"
	"github.com/ingest-engine/ingest/operator/window"
	"github.com/ingest-engine/ingest/runtime"
	"github.com/ingest-engine/ingest/state"
	"github.com/ingest-engine/ingest/stream"
)

// roundTrip encodes acc with codec, decodes it, and checks that every
// truncation fails to decode.
func roundTrip[A any](t *testing.T, codec state.Codec[A], acc A) A {
	t.Helper()
	enc := codec.Append([]byte("x"), acc)[1:]
	dec, n, err := codec.Decode(append(slices.Clone(enc), 0xff))
	if err != nil || n != len(enc) {
		t.Fatalf("%s: Decode: %v (%d of %d bytes)", codec.Name(), err, n, len(enc))
	}
	for k := range len(enc) {
		if _, _, err := codec.Decode(enc[:k]); err == nil {
			t.Fatalf("%s: Decode of %d of %d bytes: no error", codec.Name(), k, len(enc))
		}
	}
	return dec
}

// fold adds vs to agg's accumulator one by one, and also as two halves
// merged, and checks both agree (after a codec round trip).
func fold[T, A any](t *testing.T, agg window.Aggregate[T, A], vs []T, eq func(a, b A) bool) A {
	t.Helper()
	acc := agg.Init()
	for _, v := range vs {
		acc = agg.Add(acc, v)
	}
	if agg.Merge != nil {
		a, b := agg.Init(), agg.Init()
		for i, v := range vs {
			if i%2 == 0 {
				a = agg.Add(a, v)
			} else {
				b = agg.Add(b, v)
			}
		}
		if m := agg.Merge(a, b); !eq(m, acc) {
			t.Fatalf("%s: merged halves %v, added one by one %v", agg.Codec.Name(), m, acc)
		}
	}
	if dec := roundTrip(t, agg.Codec, acc); !eq(dec, acc) {
		t.Fatalf("%s: round trip gave %v, want %v", agg.Codec.Name(), dec, acc)
	}
	return acc
}

func eqv[A comparable](a, b A) bool { return a == b }

func TestBuiltinAggregates(t *testing.T) {
	evs := []ev{{"a", 5}, {"a", -3}, {"a", 12}, {"a", 5}, {"a", 0}}
	v := func(e ev) int64 { return e.V }
	f := func(e ev) float64 { return float64(e.V) / 2 }
	if got := fold(t, window.CountOf[ev](), evs, eqv); got != 5 {
		t.Errorf("count = %d, want 5", got)
	}
	if got := fold(t, window.SumOf(v), evs, eqv); got != 19 {
		t.Errorf("sum = %d, want 19", got)
	}
	if got := fold(t, window.SumFloatOf(f), evs, eqv); got != 9.5 {
		t.Errorf("float sum = %v, want 9.5", got)
	}
	if got := fold(t, window.MinOf(v, state.Int64Codec{}), evs, eqv); got != (window.Extreme[int64]{Value: -3, Valid: true}) {
		t.Errorf("min = %v", got)
	}
	if got := fold(t, window.MaxOf(func(e ev) string { return fmt.Sprint(e.V) }, state.StringCodec{}), evs, eqv); got.Value != "5" {
		t.Errorf("max of strings = %v, want 5", got)
	}
	if got := fold(t, window.AvgOf(f), evs, eqv); got.Value() != 1.9 {
		t.Errorf("avg = %v, want 1.9", got.Value())
	}
	if !math.IsNaN((window.Mean{}).Value()) {
		t.Error("the mean of nothing is not NaN")
	}
	if got := roundTrip(t, window.MinOf(v, state.Int64Codec{}).Codec, window.Extreme[int64]{}); got.Valid {
		t.Error("an empty min decodes as valid")
	}
	d := fold(t, window.CountDistinct(v, state.Int64Codec{}), evs, func(a, b *window.Distinct[int64]) bool {
		return a.Len() == b.Len() && a.Contains(5) && b.Contains(5) && a.Contains(-3) == b.Contains(-3)
	})
	if d.Len() != 4 || !d.Contains(12) || d.Contains(7) {
		t.Errorf("distinct: len %d", d.Len())
	}
}

// Codec names identify the aggregate, so a checkpoint of one is refused by
// another with the same accumulator type; Named tells apart two of the same
// built-in.
func TestAggregateCodecNames(t *testing.T) {
	v := func(e ev) int64 { return e.V }
	names := []string{
		window.CountOf[ev]().Codec.Name(),
		window.SumOf(v).Codec.Name(),
		window.SumOf(v).Named("price").Codec.Name(),
		window.SumOf(v).Named("qty").Codec.Name(),
		window.SumFloatOf(func(ev) float64 { return 0 }).Codec.Name(),
		window.MinOf(v, state.Int64Codec{}).Codec.Name(),
		window.MaxOf(v, state.Int64Codec{}).Codec.Name(),
		window.AvgOf(func(ev) float64 { return 0 }).Codec.Name(),
		window.CountDistinct(v, state.Int64Codec{}).Codec.Name(),
		window.CountDistinct(func(e ev) string { return e.Key }, state.StringCodec{}).Codec.Name(),
	}
	for i, a := range names {
		for _, b := range names[i+1:] {
			if a == b {
				t.Errorf("two aggregates share the codec name %q", a)
			}
		}
	}
	if n := window.SumOf(v).Named("price").Codec.Name(); !strings.Contains(n, "price") {
		t.Errorf("Named: %q", n)
	}
}

// distinctRes is the output of the isolation tests: the distinct count when
// the window fired and the accumulator itself, which must not change after.
type distinctRes struct {
	Key        string
	Start, End int64
	N          int64
	d          *window.Distinct[int64]
}

// buildDistinct adds s's window with CountDistinct(V) to src.
func buildDistinct(s spec, src stream.Stream[ev]) stream.Stream[distinctRes] {
	ks := stream.KeyBy(src, func(e ev) string { return e.Key })
	agg := window.CountDistinct(func(e ev) int64 { return e.V }, state.Int64Codec{})
	if !s.merge && s.kind != "session" {
		agg.Merge = nil
	}
	o := func(k string, w window.Window, d *window.Distinct[int64]) distinctRes {
		return distinctRes{Key: k, Start: w.Start, End: w.End, N: d.Len(), d: d}
	}
	var opts []stream.NodeOption
	if s.lateness > 0 {
		opts = append(opts, window.AllowedLateness(time.Duration(s.lateness)))
	}
	switch s.kind {
	case "session":
		return window.Session(ks, opID, time.Duration(s.gap), agg, o, opts...)
	case "sliding":
		return window.Sliding(ks, opID, time.Duration(s.size), time.Duration(s.slide), agg, o, opts...)
	}
	return window.Tumbling(ks, opID, time.Duration(s.size), agg, o, opts...)
}

// A mutable accumulator (CountDistinct's set, updated in place) is isolated
// from what a checkpoint captured and from results already emitted: records
// processed after the capture (and lost in the crash: they are not replayed)
// do not reach the restored state even though the snapshot is encoded after
// them, and an emitted result's set never changes afterwards, though the
// window (within its allowed lateness) goes on.
func TestMutableAccumulatorIsolation(t *testing.T) {
	for _, s := range []spec{
		{kind: "tumbling", size: 100, lateness: 1000},
		{kind: "sliding", size: 100, slide: 50, merge: true, lateness: 1000},
		{kind: "sliding", size: 100, slide: 50, lateness: 1000},
		{kind: "session", gap: 100, lateness: 1000},
	} {
		t.Run(s.String(), func(t *testing.T) {
			p := stream.New("test")
			w := buildDistinct(s, stream.From[ev](p, "src", nopSource[ev]{}))
			stream.To(w, "sink", discardSink[distinctRes]{})
			if _, err := p.Plan(); err != nil {
				t.Fatal(err)
			}
			newOp := w.Node().NewOperator
			h := open[ev, distinctRes](t, newOp, fullRange(), nil)
			// Windows fire and stay (lateness), then get late updates: a
			// result emitted first must keep its count.
			h.process(t, rec("k", 1, 10), rec("k", 2, 20))
			h.watermark(t, 300)
			h.process(t, rec("k", 3, 30))
			captured := h.capture(t, 1)
			// Lost work: new values into the same windows, then firing.
			h.process(t, rec("k", 1000, 10), rec("k", 2000, 40))
			h.watermark(t, 400)
			h.process(t, rec("k", 3000, 25))
			snap := encode(t, captured)
			for _, r := range h.out.recs {
				if r.Value.d.Len() != r.Value.N {
					t.Fatalf("result %+v: its set grew from %d to %d values after it was emitted", r.Value, r.Value.N, r.Value.d.Len())
				}
			}
			r := open[ev, distinctRes](t, newOp, fullRange(), &checkpoint.SubtaskState{Watermark: 300}, snap)
			r.process(t, rec("k", 4, 15))
			r.watermark(t, runtime.MaxWatermark)
			for _, o := range append(slices.Clone(h.out.recs[:0]), r.out.recs...) {
				for _, v := range []int64{1000, 2000, 3000} {
					if o.Value.d.Contains(v) {
						t.Fatalf("restored window %+v holds %d, added after the checkpoint", o.Value, v)
					}
				}
			}
			// The last result of the window holding 10..30 counts 1,2,3,4.
			last := slices.MaxFunc(r.out.recs, func(a, b runtime.Record[distinctRes]) int { return cmp.Compare(a.Value.N, b.Value.N) })
			if last.Value.N != 4 {
				t.Fatalf("restored results %+v; want one counting 4 values", r.out.recs)
			}
		})
	}
}
