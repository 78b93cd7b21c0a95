package state

import "fmt"

// DefaultMaxParallelism is the number of key groups when a pipeline does not
// set one. It is also Flink's default lower bound. Max parallelism is fixed
// for the life of a pipeline's state: it bounds how far a job can rescale,
// and changing it invalidates every snapshot (Restore rejects the mismatch).
const DefaultMaxParallelism = 128

// UpperBoundMaxParallelism is the largest max parallelism a Backend accepts
// (Flink's bound, 2^15). Key group numbers always fit in an int32.
const UpperBoundMaxParallelism = 1 << 15

// KeyGroupRange is the half-open interval [Start, End) of key groups one
// subtask owns. Ranges of the subtasks of one operator are contiguous,
// disjoint and cover [0, maxParallelism).
type KeyGroupRange struct{ Start, End int }

// Contains reports whether key group kg is in the range.
func (r KeyGroupRange) Contains(kg int) bool { return kg >= r.Start && kg < r.End }

// Len is the number of key groups in the range (0 for an empty or inverted range).
func (r KeyGroupRange) Len() int { return max(r.End-r.Start, 0) }

// String formats the range as "[start,end)".
func (r KeyGroupRange) String() string { return fmt.Sprintf("[%d,%d)", r.Start, r.End) }

// KeyGroupRangeFor returns the key groups that subtask (0-based) of an
// operator with the given parallelism owns. It is Flink's
// KeyGroupRangeAssignment.computeKeyGroupRangeForOperatorIndex:
// start = ceil(subtask*maxP/p), end = ceil((subtask+1)*maxP/p), so a key group
// kg belongs to subtask SubtaskForKeyGroup(maxP, p, kg).
//
// It panics unless 0 < parallelism <= maxParallelism <= UpperBoundMaxParallelism
// and 0 <= subtask < parallelism: a plan that breaks these is a programming
// error that plan validation rules out before any subtask starts.
func KeyGroupRangeFor(maxParallelism, parallelism, subtask int) KeyGroupRange {
	checkParallelism(maxParallelism, parallelism)
	if subtask < 0 || subtask >= parallelism {
		panic(fmt.Sprintf("state: subtask %d out of range for parallelism %d", subtask, parallelism))
	}
	return KeyGroupRange{
		Start: (subtask*maxParallelism + parallelism - 1) / parallelism,
		End:   ((subtask+1)*maxParallelism + parallelism - 1) / parallelism,
	}
}

// SubtaskForKeyGroup returns the subtask that owns key group kg: kg*p/maxP,
// Flink's computeOperatorIndexForKeyGroup. The runtime's hash partitioner uses
// it to route a record; it agrees with KeyGroupRangeFor by construction.
// It panics on the same invalid arguments as KeyGroupRangeFor, or if kg is
// outside [0, maxParallelism).
func SubtaskForKeyGroup(maxParallelism, parallelism, kg int) int {
	checkParallelism(maxParallelism, parallelism)
	if kg < 0 || kg >= maxParallelism {
		panic(fmt.Sprintf("state: key group %d out of range [0,%d)", kg, maxParallelism))
	}
	return kg * parallelism / maxParallelism
}

// KeyGroupFor maps a key's hash (from HashKey or a Hasher) to its key group in
// [0, maxParallelism). The hash is mixed again with the murmur3 fmix64
// finalizer first, so weak hashes (small integers) still spread evenly.
// maxParallelism must be positive.
func KeyGroupFor(hash uint64, maxParallelism int) int {
	return int(fmix64(hash) % uint64(maxParallelism))
}

func checkParallelism(maxParallelism, parallelism int) {
	if maxParallelism <= 0 || maxParallelism > UpperBoundMaxParallelism {
		panic(fmt.Sprintf("state: max parallelism %d out of range (0,%d]", maxParallelism, UpperBoundMaxParallelism))
	}
	if parallelism <= 0 || parallelism > maxParallelism {
		panic(fmt.Sprintf("state: parallelism %d out of range (0,%d] (max parallelism)", parallelism, maxParallelism))
	}
}

// fmix64 is murmur3's 64-bit finalizer: a bijection whose output bits each
// depend on every input bit.
func fmix64(h uint64) uint64 {
	h ^= h >> 33
	h *= 0xff51afd7ed558ccd
	h ^= h >> 33
	h *= 0xc4ceb9fe1a85ec53
	h ^= h >> 33
	return h
}
