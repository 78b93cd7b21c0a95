package window

import (
	"time"

	"github.com/ingest-engine/ingest/stream"
)

// Sliding groups ks into event-time windows of size starting every slide per
// key, [k*slide, k*slide+size) in Unix nanoseconds (Flink's
// SlidingEventTimeWindows with offset 0), folds each with agg, and when the
// watermark reaches a window's MaxTimestamp emits output(key, window,
// accumulator) with event time Window.MaxTimestamp. A record belongs to about
// size/slide windows; size need not be a multiple of slide. When size < slide
// the windows leave gaps, and records in a gap belong to no window and are
// ignored.
//
// With agg.Merge set, state is kept per pane, the greatest common divisor of
// size and slide: a record costs one state update, and a window firing merges
// its size/pane panes. Without Merge, every record is added to each of its
// windows (size/slide updates). Choosing by setting Merge changes the state
// layout, so a checkpoint of one is refused by the other.
//
// opts are node options (stream.Parallelism) and window options
// (AllowedLateness, LateRecordsTo).
func Sliding[T any, K comparable, A any, O any](ks stream.KeyedStream[T, K], id string, size, slide time.Duration,
	agg Aggregate[T, A], output func(K, Window, A) O, opts ...stream.NodeOption) stream.Stream[O] {
	if size <= 0 || slide <= 0 {
		ks.Pipeline().Errorf("window %s: size %v and slide %v must be positive", id, size, slide)
	}
	return aligned(ks, id, "sliding", size, slide, agg, output, opts)
}
