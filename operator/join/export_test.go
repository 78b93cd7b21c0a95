package join

import (
	"fmt"

	"github.com/ingest-engine/ingest/runtime"
)

// BufferedLeft returns the left records op (an opened Interval or Inner join
// subtask) keeps in the bucket holding key at event time t.
func BufferedLeft[L, R any, K comparable, O any](op runtime.Operator, key K, t int64) ([]runtime.Record[L], error) {
	j, ok := op.(*bucketJoin[L, R, K, O])
	if !ok {
		return nil, fmt.Errorf("%T is not a bucket join of these types", op)
	}
	return j.left.Get(bucketKey[K]{key: key, slot: j.g.bucket(t), hash: j.hash(key)}), nil
}

// BufferedRight is BufferedLeft for the right side.
func BufferedRight[L, R any, K comparable, O any](op runtime.Operator, key K, t int64) ([]runtime.Record[R], error) {
	j, ok := op.(*bucketJoin[L, R, K, O])
	if !ok {
		return nil, fmt.Errorf("%T is not a bucket join of these types", op)
	}
	return j.right.Get(bucketKey[K]{key: key, slot: j.g.bucket(t), hash: j.hash(key)}), nil
}

// WindowBuffered returns the left and right records op (an opened window
// join subtask) keeps for key in the window holding event time t.
func WindowBuffered[L, R any, K comparable, O any](op runtime.Operator, key K, t int64) ([]L, []R, error) {
	j, ok := op.(*windowJoin[L, R, K, O])
	if !ok {
		return nil, nil, fmt.Errorf("%T is not a window join of these types", op)
	}
	start, _ := windowOf(t, j.size)
	bk := bucketKey[K]{key: key, slot: start, hash: j.hash(key)}
	return j.left.Get(bk), j.right.Get(bk), nil
}

// Late returns how many left and right records op dropped as late.
func Late(op runtime.Operator) (left, right int64, err error) {
	switch j := op.(type) {
	case interface{ lateCounts() [2]int64 }:
		n := j.lateCounts()
		return n[0], n[1], nil
	}
	return 0, 0, fmt.Errorf("%T is not a join", op)
}

func (j *bucketJoin[L, R, K, O]) lateCounts() [2]int64 { return j.late.n }
func (j *windowJoin[L, R, K, O]) lateCounts() [2]int64 { return j.late.n }

func (j *groupJoin[L, R, K, A, O]) lateCounts() [2]int64 { return j.late.n }

// BucketWidth returns the bucket width of op (an Interval or Inner join
// subtask), 0 when it keeps one bucket per key.
func BucketWidth(op runtime.Operator) int64 {
	if j, ok := op.(interface{ bucketWidth() int64 }); ok {
		return j.bucketWidth()
	}
	return -1
}

func (j *bucketJoin[L, R, K, O]) bucketWidth() int64 { return j.g.width }

// Arithmetic, for tests of the edges of representable time.
var (
	SatAdd   = satAdd
	FloorDiv = floorDiv
	WindowOf = windowOf
)
