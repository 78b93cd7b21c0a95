package join

import (
	"fmt"
	"reflect"

	"github.com/ingest-engine/ingest/runtime"
	"github.com/ingest-engine/ingest/state"
	"github.com/ingest-engine/ingest/stream"
)

// Option configures a join.
type Option func(*options)

// options collects the Options of one join.
type options struct {
	// left and right are a state.Codec[L] and a state.Codec[R], nil for the
	// default. They are typed when the join is built, which knows L and R.
	left, right any
	node        []stream.NodeOption
	uniqueLeft  bool
}

// LeftCodec sets the codec of the left records kept in state. The default
// value is stream.CodecFor[L](): binary for basic types, JSON otherwise. The
// codec's name is part of the state's schema: changing it makes the join
// refuse to restore older checkpoints.
func LeftCodec[L any](c state.Codec[L]) Option {
	return func(o *options) { o.left = c }
}

// RightCodec sets the codec of the right records kept in state. The default
// value is stream.CodecFor[R](), as for LeftCodec.
func RightCodec[R any](c state.Codec[R]) Option {
	return func(o *options) { o.right = c }
}

// NodeOptions applies node options (stream.Parallelism) to the join node.
// The default parallelism is the pipeline's.
func NodeOptions(opts ...stream.NodeOption) Option {
	return func(o *options) { o.node = append(o.node, opts...) }
}

// UniqueLeft declares that no two left records share a key, as SQL's
// PRIMARY KEY … NOT ENFORCED on the left input's source does. Only
// IntervalUntil takes it: a right record that finds its key's left record
// is joined and not kept (no other left record can come for it), and a left
// record takes the right records that waited for it out of state. A second
// left record of a key while the first is still kept fails the job with an
// error wrapping runtime.ErrUnrecoverable, except under at-least-once
// checkpoints (runtime.Context.CheckpointMode), whose restores send such
// records again; one that comes after the watermark passed the first one's
// bound is not detected, and joins the right records kept since. The
// declaration is part of the state's schema: a
// checkpoint of the join with the other declaration is refused.
func UniqueLeft() Option {
	return func(o *options) { o.uniqueLeft = true }
}

// sides is what every join needs from its two inputs, checked and resolved.
type sides[L, R any, K comparable] struct {
	keyL     func(L) K
	keyR     func(R) K
	keyCodec state.Codec[K]
	codecL   state.Codec[L]
	codecR   state.Codec[R]
	node     []stream.NodeOption
	// uniqueLeft is UniqueLeft's declaration.
	uniqueLeft bool
}

// resolve checks that left and right can be joined and applies opts. Problems
// are recorded as pipeline errors (reported by Plan and Run), with usable
// defaults in their place so the pipeline can still be built.
func resolve[L, R any, K comparable](kind, id string, left stream.KeyedStream[L, K], right stream.KeyedStream[R, K], opts []Option) sides[L, R, K] {
	p := left.Pipeline()
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	s := sides[L, R, K]{keyL: left.Key, keyR: right.Key, keyCodec: left.KeyCodec, node: o.node, uniqueLeft: o.uniqueLeft}
	if right.Pipeline() != p {
		p.Errorf("%s %s: the left and right streams belong to different pipelines", kind, id)
	}
	if left.Key == nil || right.Key == nil {
		p.Errorf("%s %s: both inputs must be keyed (stream.KeyBy)", kind, id)
	}
	switch {
	case left.KeyCodec == nil || right.KeyCodec == nil:
		p.Errorf("%s %s: both inputs need a key codec (stream.KeyBy sets one)", kind, id)
		s.keyCodec = stream.CodecFor[K]()
	case left.KeyCodec.Name() != right.KeyCodec.Name():
		// Keys of both sides meet in one state: they must be encoded alike.
		p.Errorf("%s %s: the left key codec %q differs from the right key codec %q: key both inputs with the same codec", kind, id, left.KeyCodec.Name(), right.KeyCodec.Name())
	}
	s.codecL = codecOf[L](p, kind, id, "left", o.left)
	s.codecR = codecOf[R](p, kind, id, "right", o.right)
	return s
}

// noUniqueLeft records a pipeline error when s declares a unique left side,
// which only IntervalUntil takes.
func noUniqueLeft[L, R any, K comparable](p *stream.Pipeline, kind, id string, s sides[L, R, K]) {
	if s.uniqueLeft {
		p.Errorf("%s %s: a unique left side (UniqueLeft) is taken only by an interval join bounded by a left record's own time (IntervalUntil)", kind, id)
	}
}

// codecOf returns c as a state.Codec[T], or the default codec when c is nil
// or (recorded as a pipeline error) encodes another type.
func codecOf[T any](p *stream.Pipeline, kind, id, which string, c any) state.Codec[T] {
	if c == nil {
		return stream.CodecFor[T]()
	}
	if tc, ok := c.(state.Codec[T]); ok {
		return tc
	}
	p.Errorf("%s %s: the %s codec %T does not encode %v, the record type of the %s input", kind, id, which, c, reflect.TypeFor[T](), which)
	return stream.CodecFor[T]()
}

// addNode adds n with left feeding input 0 and right feeding input 1, and
// returns its output stream.
func addNode[L, R any, K comparable, O any](left stream.KeyedStream[L, K], right stream.KeyedStream[R, K], n *runtime.Node, s sides[L, R, K]) stream.Stream[O] {
	out := stream.Add[L, O](left.Stream, n, s.node...)
	stream.Connect(right.Stream, n, 1)
	return out
}

// inputError reports a batch whose type does not fit the input it came on:
// the plan wired the node wrong.
func inputError(task string, input int) error {
	return fmt.Errorf("%s: a join has inputs 0 (left) and 1 (right), got a batch on input %d", task, input)
}
