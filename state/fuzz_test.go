package state_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"math"
	"reflect"
	"slices"
	"testing"

	"github.com/ingest-engine/ingest/row"
	"github.com/ingest-engine/ingest/state"
)

// FuzzRestoreChecksummed reaches the snapshot parser behind its checksums,
// which FuzzRestore's arbitrary bytes almost never get past: the target
// frames fuzzed parts as a snapshot file with valid checksums, header
// (after the magic number) and up to two section bodies, computing the
// CRCs, the index of the sections (each section's key group is its body's
// first uvarint, as the format says) and the footer. The seed corpus,
// testdata/fuzz/FuzzRestoreChecksummed, holds the parts of real snapshots:
// window, session and join state written by `ingest run` on the examples,
// and snapshots with every codec of this package and of package row at max
// parallelism 1 and 4, where fuzzed keys still land in their key group.
// The file must then pass fuzzCheckSnapshot.
func FuzzRestoreChecksummed(f *testing.F) {
	f.Fuzz(func(t *testing.T, header, sec0, sec1 []byte) {
		fuzzCheckSnapshot(t, frameSnapshot(header, sec0, sec1))
	})
}

// fuzzCheckSnapshot holds Inspect, Restore and registration to each other on
// data, an encoded snapshot or garbage:
//   - nothing panics; a failure of Inspect or Restore wraps ErrCorrupt, and
//     Restore (with a backend of the operator, max parallelism and key
//     groups the header names) fails exactly when Inspect does (both refuse
//     a state with different kinds or codecs in two key groups);
//   - every restored state whose codecs this target knows registers, or
//     fails with ErrCorrupt (entries that do not decode) or ErrStateMismatch
//     (a key that hashes to another key group);
//   - when all of them register, the backend's next snapshot describes the
//     same states with the same entry counts, restores, and registers again:
//     state that was read once is written back readable.
func fuzzCheckSnapshot(t *testing.T, data []byte) {
	info, ierr := state.Inspect(data)
	if ierr != nil {
		if !state.IsCorrupt(ierr) {
			t.Fatalf("Inspect error %v does not wrap ErrCorrupt", ierr)
		}
		b := state.NewBackend("op", state.DefaultMaxParallelism, state.KeyGroupRange{Start: 0, End: state.DefaultMaxParallelism})
		if err := b.Restore(data); err == nil {
			t.Fatalf("Restore accepted a snapshot Inspect refuses: %v", ierr)
		}
		return
	}
	states, consistent := restoredStates(info)
	if !consistent {
		t.Fatalf("Inspect accepted a snapshot with a state of two kinds or codec sets: %+v", info)
	}
	b := state.NewBackend(info.Operator, info.MaxParallelism, info.KeyGroups)
	if err := b.Restore(data); err != nil {
		if info.Incremental && !state.IsCorrupt(err) {
			return // alone, it lacks the files it builds on
		}
		t.Fatalf("Inspect accepts the snapshot, Restore refuses it: %v", err)
	}
	all := true
	for _, st := range states {
		known, err := registerLike(b, st)
		switch {
		case !known:
			all = false
		case err != nil && !state.IsCorrupt(err) && !errors.Is(err, state.ErrStateMismatch):
			t.Fatalf("registering %q (%v %q): error %v is neither ErrCorrupt nor ErrStateMismatch", st.Name, st.Kind, st.Codecs, err)
		case err != nil:
			all = false
			if !slices.Contains(b.Unclaimed(), st.Name) {
				t.Fatalf("a failed registration of %q did not leave it unclaimed: %v", st.Name, b.Unclaimed())
			}
		}
	}
	if !all {
		return
	}
	again, err := b.Snapshot().Encode()
	if err != nil {
		t.Fatalf("encoding restored state: %v", err)
	}
	info2, err := state.Inspect(again)
	if err != nil {
		t.Fatalf("the snapshot of restored state does not inspect: %v", err)
	}
	if got, want := sectionSummary(info2), sectionSummary(info); !reflect.DeepEqual(got, want) {
		t.Fatalf("restored state snapshots differently:\n got %v\nwant %v", got, want)
	}
	b2 := state.NewBackend(info.Operator, info.MaxParallelism, info.KeyGroups)
	if err := b2.Restore(again); err != nil {
		t.Fatalf("the snapshot of restored state does not restore: %v", err)
	}
	for _, st := range states {
		if _, err := registerLike(b2, st); err != nil {
			t.Fatalf("state %q decoded from the snapshot but not from its re-encoding: %v", st.Name, err)
		}
	}
}

// restoredStates returns each state of info once. consistent is false if a
// name has different kinds or codecs in different key groups, which Inspect
// and Restore refuse.
func restoredStates(info *state.SnapshotInfo) (states []state.StateInfo, consistent bool) {
	for _, s := range info.Sections {
		for _, st := range s.States {
			if i := slices.IndexFunc(states, func(o state.StateInfo) bool { return o.Name == st.Name }); i >= 0 {
				if states[i].Kind != st.Kind || !slices.Equal(states[i].Codecs, st.Codecs) {
					return nil, false
				}
				continue
			}
			states = append(states, st)
		}
	}
	return states, true
}

// sectionSummary is what a snapshot says of its states, less byte counts
// and offsets, which a re-encoding may change (varints and JSON have
// several encodings of one value), and less sections without states, which
// the parser accepts and the encoder does not write.
func sectionSummary(info *state.SnapshotInfo) []any {
	out := []any{info.Operator, info.MaxParallelism, info.KeyGroups}
	for _, s := range info.Sections {
		if len(s.States) == 0 {
			continue
		}
		out = append(out, s.KeyGroup)
		for _, st := range s.States {
			out = append(out, st.Name, st.Kind, st.Codecs, st.Entries)
		}
	}
	return out
}

// castagnoli is the snapshot format's CRC-32C.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// frameSnapshot builds a snapshot file around header (the bytes after the
// magic number, before the header CRC) and the non-empty section bodies.
func frameSnapshot(header []byte, sections ...[]byte) []byte {
	out := append([]byte("IGKS"), header...)
	out = binary.LittleEndian.AppendUint32(out, crc32.Checksum(out, castagnoli))
	var index []byte
	n := 0
	for _, body := range sections {
		if len(body) == 0 {
			continue
		}
		kg, _ := binary.Uvarint(body)
		off := len(out)
		out = append(out, body...)
		out = binary.LittleEndian.AppendUint32(out, crc32.Checksum(body, castagnoli))
		index = binary.AppendUvarint(index, kg)
		index = binary.AppendUvarint(index, uint64(off))
		index = binary.AppendUvarint(index, uint64(len(out)-off))
		n++
	}
	indexOff := len(out)
	out = binary.AppendUvarint(out, uint64(n))
	out = append(out, index...)
	crc := crc32.Checksum(out[indexOff:], castagnoli)
	out = binary.LittleEndian.AppendUint64(out, uint64(indexOff))
	out = binary.LittleEndian.AppendUint32(out, crc)
	return append(out, "IGKS"...)
}

// FuzzCodecDecode holds every codec of this package to its contract
// (Codec.Decode): on arbitrary bytes it returns an error or a value and
// 0 <= n <= len(src), never panics, and a decoded value re-encodes to bytes
// that decode to the same value, consuming exactly them. The codec is
// chosen by number (see fuzzCodecs).
func FuzzCodecDecode(f *testing.F) {
	f.Fuzz(func(t *testing.T, codec uint8, data []byte) {
		fuzzCodecs[int(codec)%len(fuzzCodecs)](t, data)
	})
}

// fuzzCodecs are the codecs FuzzCodecDecode checks, by number.
var fuzzCodecs = []func(*testing.T, []byte){
	func(t *testing.T, b []byte) { checkCodec(t, state.Int64Codec{}, b, eq[int64]) },
	func(t *testing.T, b []byte) { checkCodec(t, state.StringCodec{}, b, eq[string]) },
	func(t *testing.T, b []byte) { checkCodec(t, state.BytesCodec{}, b, bytes.Equal) },
	func(t *testing.T, b []byte) {
		checkCodec(t, state.Float64Codec{}, b, func(x, y float64) bool { return math.Float64bits(x) == math.Float64bits(y) })
	},
	func(t *testing.T, b []byte) { checkCodec(t, state.BoolCodec{}, b, eq[bool]) },
	func(t *testing.T, b []byte) {
		checkCodec(t, state.JSONCodec[any](), b, func(x, y any) bool { return reflect.DeepEqual(x, y) })
	},
}

func eq[T comparable](x, y T) bool { return x == y }

func checkCodec[T any](t *testing.T, c state.Codec[T], src []byte, equal func(T, T) bool) {
	v, n, err := c.Decode(src)
	if err != nil {
		return
	}
	if n < 0 || n > len(src) {
		t.Fatalf("codec %s consumed %d of %d bytes", c.Name(), n, len(src))
	}
	enc := c.Append(nil, v)
	v2, n2, err := c.Decode(enc)
	if err != nil {
		t.Fatalf("codec %s: %v decoded from %x re-encodes to %x, which does not decode: %v", c.Name(), v, src[:n], enc, err)
	}
	if n2 != len(enc) || !equal(v, v2) {
		t.Fatalf("codec %s: %v decoded from %x re-encodes to %x, which decodes to %v using %d bytes", c.Name(), v, src[:n], enc, v2, n2)
	}
}

// registerLike registers st on b with the codecs its names say, when this
// target knows them all (known false otherwise): the codecs of this package
// and package row's, keys of the comparable ones. A snapshot may hold a
// state named "" (Restore accepts it), which no operator can register.
func registerLike(b *state.Backend, st state.StateInfo) (known bool, err error) {
	if len(st.Codecs) == 0 || st.Name == "" {
		return false, nil // no key codec; a state without a name cannot be registered
	}
	switch st.Codecs[0] {
	case "int64":
		return withKey(b, st, state.Int64Codec{})
	case "string":
		return withKey(b, st, state.StringCodec{})
	case "bool":
		return withKey(b, st, state.BoolCodec{})
	case "row.value.v1":
		return withKey(b, st, row.ValueCodec{})
	}
	return false, nil
}

func withKey[K comparable](b *state.Backend, st state.StateInfo, kc state.Codec[K]) (bool, error) {
	rest := st.Codecs[1:]
	switch {
	case st.Kind == state.KindTimers && len(rest) == 0:
		_, err := state.NewTimers(b, st.Name, kc)
		return true, err
	case st.Kind == state.KindValue && len(rest) == 1:
		return valueState(b, st.Name, kc, rest[0])
	case st.Kind == state.KindList && len(rest) == 1:
		return listState(b, st.Name, kc, rest[0])
	case st.Kind == state.KindMap && len(rest) == 2:
		switch rest[0] {
		case "int64":
			return mapState(b, st.Name, kc, state.Int64Codec{}, rest[1])
		case "string":
			return mapState(b, st.Name, kc, state.StringCodec{}, rest[1])
		case "bool":
			return mapState(b, st.Name, kc, state.BoolCodec{}, rest[1])
		case "row.value.v1":
			return mapState(b, st.Name, kc, row.ValueCodec{}, rest[1])
		}
	}
	return false, nil
}

// try reports a registration's error as a known codec's.
func try[S any](_ S, err error) (bool, error) { return true, err }

func valueState[K comparable](b *state.Backend, name string, kc state.Codec[K], v string) (bool, error) {
	switch v {
	case "int64":
		return try(state.NewValueState[K, int64](b, name, kc, state.Int64Codec{}))
	case "string":
		return try(state.NewValueState[K, string](b, name, kc, state.StringCodec{}))
	case "bytes":
		return try(state.NewValueState[K, []byte](b, name, kc, state.BytesCodec{}))
	case "float64":
		return try(state.NewValueState[K, float64](b, name, kc, state.Float64Codec{}))
	case "bool":
		return try(state.NewValueState[K, bool](b, name, kc, state.BoolCodec{}))
	case state.JSONCodec[any]().Name():
		return try(state.NewValueState(b, name, kc, state.JSONCodec[any]()))
	case "row.value.v1":
		return try(state.NewValueState[K, row.Value](b, name, kc, row.ValueCodec{}))
	case "row.row.v1":
		return try(state.NewValueState[K, row.Row](b, name, kc, row.RowCodec{}))
	}
	return false, nil
}

func listState[K comparable](b *state.Backend, name string, kc state.Codec[K], v string) (bool, error) {
	switch v {
	case "int64":
		return try(state.NewListState[K, int64](b, name, kc, state.Int64Codec{}))
	case "string":
		return try(state.NewListState[K, string](b, name, kc, state.StringCodec{}))
	case "bytes":
		return try(state.NewListState[K, []byte](b, name, kc, state.BytesCodec{}))
	case "float64":
		return try(state.NewListState[K, float64](b, name, kc, state.Float64Codec{}))
	case "bool":
		return try(state.NewListState[K, bool](b, name, kc, state.BoolCodec{}))
	case state.JSONCodec[any]().Name():
		return try(state.NewListState(b, name, kc, state.JSONCodec[any]()))
	case "row.value.v1":
		return try(state.NewListState[K, row.Value](b, name, kc, row.ValueCodec{}))
	case "row.row.v1":
		return try(state.NewListState[K, row.Row](b, name, kc, row.RowCodec{}))
	}
	return false, nil
}

func mapState[K, UK comparable](b *state.Backend, name string, kc state.Codec[K], ukc state.Codec[UK], v string) (bool, error) {
	switch v {
	case "int64":
		return try(state.NewMapState[K, UK, int64](b, name, kc, ukc, state.Int64Codec{}))
	case "string":
		return try(state.NewMapState[K, UK, string](b, name, kc, ukc, state.StringCodec{}))
	case "bytes":
		return try(state.NewMapState[K, UK, []byte](b, name, kc, ukc, state.BytesCodec{}))
	case "float64":
		return try(state.NewMapState[K, UK, float64](b, name, kc, ukc, state.Float64Codec{}))
	case "bool":
		return try(state.NewMapState[K, UK, bool](b, name, kc, ukc, state.BoolCodec{}))
	case state.JSONCodec[any]().Name():
		return try(state.NewMapState(b, name, kc, ukc, state.JSONCodec[any]()))
	case "row.value.v1":
		return try(state.NewMapState[K, UK, row.Value](b, name, kc, ukc, row.ValueCodec{}))
	case "row.row.v1":
		return try(state.NewMapState[K, UK, row.Row](b, name, kc, ukc, row.RowCodec{}))
	}
	return false, nil
}
