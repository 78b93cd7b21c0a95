package window

import (
	"fmt"
	"strings"
	"time"

	"github.com/ingest-engine/ingest/runtime"
	"github.com/ingest-engine/ingest/stream"
)

// Tumbling groups ks into fixed, non-overlapping event-time windows of size
// per key, [k*size, (k+1)*size) in Unix nanoseconds, folds each with agg, and
// when the watermark reaches a window's MaxTimestamp emits
// output(key, window, accumulator) with event time Window.MaxTimestamp.
//
// opts are node options (stream.Parallelism) and window options
// (AllowedLateness, LateRecordsTo). By default records for a window that
// already fired are late: they are dropped and counted.
//
// State per key: one accumulator per open window.
func Tumbling[T any, K comparable, A any, O any](ks stream.KeyedStream[T, K], id string, size time.Duration,
	agg Aggregate[T, A], output func(K, Window, A) O, opts ...stream.NodeOption) stream.Stream[O] {
	if size <= 0 {
		ks.Pipeline().Errorf("window %s: size %v must be positive", id, size)
	}
	return aligned(ks, id, "tumbling", size, size, agg, output, opts)
}

// aligned adds a tumbling or sliding window node.
func aligned[T any, K comparable, A any, O any](ks stream.KeyedStream[T, K], id, kind string, size, slide time.Duration,
	agg Aggregate[T, A], output func(K, Window, A) O, opts []stream.NodeOption) stream.Stream[O] {
	checkAggregate(ks.Pipeline(), id, kind, agg, false)
	var pane int64
	desc := fmt.Sprintf("%s event-time window %v", kind, size)
	if size != slide {
		desc += fmt.Sprintf(" every %v", slide)
		if agg.Merge != nil && size > 0 && slide > 0 {
			pane = gcd(int64(size), int64(slide))
			desc += fmt.Sprintf(" (panes of %v)", time.Duration(pane))
		}
	}
	n := &runtime.Node{ID: id, Describe: desc}
	cfg := new(settings)
	n.NewOperator = func() runtime.Operator {
		if pane > 0 {
			return &paneOp[T, K, A, O]{size: int64(size), slide: int64(slide), pane: pane, agg: agg, key: ks.Key, keyCodec: ks.KeyCodec, output: output, opBase: opBase[T, K, O]{cfg: *cfg}}
		}
		return &alignedOp[T, K, A, O]{size: int64(size), slide: int64(slide), agg: agg, key: ks.Key, keyCodec: ks.KeyCodec, output: output, opBase: opBase[T, K, O]{cfg: *cfg}}
	}
	return addNode[T, O](ks.Stream, n, cfg, opts)
}

// checkAggregate reports, as a builder error, the functions a window of kind
// needs that agg lacks.
func checkAggregate[T, A any](p *stream.Pipeline, id, kind string, agg Aggregate[T, A], needMerge bool) {
	var missing []string
	for _, f := range []struct {
		name string
		nil  bool
	}{{"Init", agg.Init == nil}, {"Add", agg.Add == nil}, {"Merge", needMerge && agg.Merge == nil}, {"Codec", agg.Codec == nil}} {
		if f.nil {
			missing = append(missing, f.name)
		}
	}
	if len(missing) > 0 {
		need := "Init, Add and Codec"
		if needMerge {
			need = "Init, Add, Merge and Codec"
		}
		p.Errorf("window %s: a %s window's aggregate needs %s; it has no %s", id, kind, need, strings.Join(missing, ", "))
	}
}
