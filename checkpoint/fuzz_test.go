package checkpoint

import (
	"bytes"
	"testing"
	"time"

	"github.com/ingest-engine/ingest/storage"
)

// FuzzDecodeMetadata feeds DecodeMetadata what a recovery may find in a
// metadata file (the seed corpus, testdata/fuzz/FuzzDecodeMetadata, holds
// real files written by `ingest run` on the examples, without the storage
// trailer). It must never panic, and what it accepts must be a fixed point
// of the format: its Encode decodes again, with the version checked and the
// tasks sorted, to metadata that encodes to the same bytes, so a
// checkpoint's metadata reads back as the value that was written.
func FuzzDecodeMetadata(f *testing.F) {
	// Metadata as the coordinator builds it, from the current encoder, so the
	// corpus keeps up with the format even if the committed files lag.
	f.Add(encodedMetadata(f, &Metadata{
		Version: MetadataVersion, Pipeline: "orders", JobID: "job-1", ID: 3,
		TriggeredAt: time.Date(2030, 1, 2, 3, 4, 5, 6, time.UTC),
		CompletedAt: time.Date(2030, 1, 2, 3, 4, 6, 0, time.FixedZone("", 3600)),
		Tasks: []SubtaskState{
			{Task: TaskID{"src", 0}, Inline: []byte(`{"next":7}`), Watermark: -1 << 63},
			{Task: TaskID{"agg", 1}, State: &storage.Handle{Name: "state-agg-1", Checkpoint: 3, Size: 120, CRC: 7},
				Alignment: time.Millisecond, SyncDuration: 2, AsyncDuration: 3},
			{Task: TaskID{"sink", 0}, Committables: []Committable{{PreparedAt: 2, Data: []byte("part-0")}, {PreparedAt: 3, Data: nil}}},
		},
		Commits: []Commit{{Checkpoint: 2, Sink: "sink", Committables: [][]byte{[]byte("part-0"), {}}}},
	}))
	f.Add(encodedMetadata(f, &Metadata{Version: MetadataVersion, Final: true}))
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := DecodeMetadata(data)
		if err != nil {
			if m != nil {
				t.Fatalf("DecodeMetadata returned metadata with error %v", err)
			}
			return
		}
		if m.Version != MetadataVersion {
			t.Fatalf("DecodeMetadata accepted format version %d", m.Version)
		}
		for i := 1; i < len(m.Tasks); i++ {
			if m.Tasks[i-1].Task.Compare(m.Tasks[i].Task) > 0 {
				t.Fatalf("decoded tasks not sorted: %v before %v", m.Tasks[i-1].Task, m.Tasks[i].Task)
			}
		}
		for _, st := range m.Tasks {
			if got, ok := m.Task(st.Task); !ok || got.Task != st.Task {
				t.Fatalf("Task(%v) does not find a decoded task", st.Task)
			}
		}
		once, err := m.Encode()
		if err != nil {
			t.Fatalf("decoded metadata does not encode: %v", err)
		}
		again, err := DecodeMetadata(once)
		if err != nil {
			t.Fatalf("metadata written by Encode does not decode: %v\n%s", err, once)
		}
		twice, err := again.Encode()
		if err != nil {
			t.Fatalf("re-decoded metadata does not encode: %v", err)
		}
		if !bytes.Equal(once, twice) {
			t.Fatalf("metadata changed across Encode and DecodeMetadata:\n%s\nthen\n%s", once, twice)
		}
		if again.ID != m.ID || again.Final != m.Final || len(again.Tasks) != len(m.Tasks) ||
			!again.TriggeredAt.Equal(m.TriggeredAt) || !again.CompletedAt.Equal(m.CompletedAt) || again.Size() != m.Size() {
			t.Fatalf("metadata changed across Encode and DecodeMetadata: %+v, then %+v", m, again)
		}
	})
}

func encodedMetadata(f *testing.F, m *Metadata) []byte {
	b, err := m.Encode()
	if err != nil {
		f.Fatal(err)
	}
	return b
}

// FuzzDecodeLedger feeds DecodeLedger what a recovery may find in the
// checkpoint ledger. It must never panic, and what it accepts is a ledger a
// recovery can trust: a reservation that is not negative, failed ids sorted
// and unique (IsFailed searches them), and a fixed point of the format.
func FuzzDecodeLedger(f *testing.F) {
	for _, l := range []Ledger{
		{Pipeline: "quickstart", JobID: "0123456789abcdef", Reserved: 16},
		{Pipeline: "p", JobID: "j", Reserved: 48, Failed: []int64{3, 17, 40}},
		{},
	} {
		data, err := l.Encode()
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Add([]byte(`{"version":1,"reserved":-1}`))
	f.Add([]byte(`{"version":1,"failed":[5,5,2]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		l, err := DecodeLedger(data)
		if err != nil {
			if l != nil {
				t.Fatalf("DecodeLedger returned a ledger with error %v", err)
			}
			return
		}
		if l.Reserved < 0 {
			t.Fatalf("accepted a negative reservation %d", l.Reserved)
		}
		for i := 1; i < len(l.Failed); i++ {
			if l.Failed[i-1] >= l.Failed[i] {
				t.Fatalf("failed ids %v not sorted and unique", l.Failed)
			}
		}
		for _, id := range l.Failed {
			if !l.IsFailed(id) {
				t.Fatalf("IsFailed(%d) = false for a listed id", id)
			}
		}
		again, err := l.Encode()
		if err != nil {
			t.Fatal(err)
		}
		back, err := DecodeLedger(again)
		if err != nil {
			t.Fatalf("re-decoding %q: %v", again, err)
		}
		if b2, _ := back.Encode(); !bytes.Equal(b2, again) {
			t.Fatalf("not a fixed point: %q then %q", again, b2)
		}
	})
}
