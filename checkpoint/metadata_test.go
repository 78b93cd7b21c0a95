package checkpoint

import (
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ingest-engine/ingest/storage"
)

// Invariant 2: "Recovery restores source positions, operator state, timers,
// watermarks and sink commit metadata all from the same checkpoint."
// Metadata: "It holds everything a recovery restores, all from this one
// checkpoint". So the metadata of N holds every task's acknowledgement of N,
// exactly as acknowledged, sorted by task (Metadata.Task binary-searches).
func TestMetadata_HoldsEveryTaskStateSortedByTask(t *testing.T) {
	tasks := []TaskID{sinkB, src1, sink1, map0, src0, sink0}
	o := testOptions()
	s := newScenarioCfg(t, Config{Options: o, Pipeline: "orders", JobID: "job-7", Tasks: tasks, NextID: 1})
	s.tick(0)
	tr := s.triggerNext()
	states := map[TaskID]SubtaskState{}
	for i, task := range tasks { // acks in a non-sorted order
		st := SubtaskState{
			Task:          task,
			State:         &storage.Handle{Name: task.String(), Checkpoint: tr.ID, Size: int64(100 + i), CRC: uint32(i)},
			Inline:        []byte("pos-" + task.String()),
			Watermark:     int64(1000 * i),
			Alignment:     time.Duration(i) * time.Millisecond,
			SyncDuration:  time.Microsecond,
			AsyncDuration: time.Duration(i) * time.Second,
		}
		states[task] = st
		s.at(10*time.Second + time.Duration(i)*time.Second)
		s.ack(tr.ID, st)
	}
	var w WriteMetadata
	for _, a := range s.all {
		if x, ok := a.(WriteMetadata); ok {
			w = x
		}
	}
	m := w.Metadata
	if m == nil {
		t.Fatal("no WriteMetadata after every task acked")
	}
	if m.Version != MetadataVersion || m.Pipeline != "orders" || m.JobID != "job-7" || m.ID != tr.ID || m.Final {
		t.Fatalf("metadata header = %d %q %q %d final=%v", m.Version, m.Pipeline, m.JobID, m.ID, m.Final)
	}
	if !m.TriggeredAt.Equal(tr.Timestamp) || !m.CompletedAt.Equal(s.now) {
		t.Fatalf("metadata times = %v, %v; want trigger %v and last ack %v", m.TriggeredAt, m.CompletedAt, tr.Timestamp, s.now)
	}
	if len(m.Tasks) != len(tasks) {
		t.Fatalf("metadata has %d tasks, want %d", len(m.Tasks), len(tasks))
	}
	for i := 1; i < len(m.Tasks); i++ {
		if m.Tasks[i-1].Task.Compare(m.Tasks[i].Task) >= 0 {
			t.Fatalf("metadata tasks not sorted: %v before %v", m.Tasks[i-1].Task, m.Tasks[i].Task)
		}
	}
	for _, task := range tasks {
		got, ok := m.Task(task)
		if !ok || !reflect.DeepEqual(got, states[task]) {
			t.Fatalf("Task(%v) = %+v, %v; want %+v", task, got, ok, states[task])
		}
	}
	if _, ok := m.Task(ghost); ok {
		t.Fatalf("Task(%v) found a task that did not ack", ghost)
	}
	var size int64
	for _, st := range states {
		size += st.State.Size + int64(len(st.Inline))
	}
	if got := m.Size(); got != size {
		t.Fatalf("Size = %d, want %d", got, size)
	}
}

// Metadata is "the single file whose durable, atomic write makes a checkpoint
// complete": what Encode writes, DecodeMetadata must read back unchanged.
func TestMetadata_EncodeDecodeRoundTrip(t *testing.T) {
	m := &Metadata{
		Version:     MetadataVersion,
		Pipeline:    "orders",
		JobID:       "job-7",
		ID:          42,
		Final:       true,
		TriggeredAt: time.Date(2030, 1, 2, 3, 4, 5, 6, time.UTC),
		CompletedAt: time.Date(2030, 1, 2, 3, 4, 9, 7, time.UTC),
		Tasks: []SubtaskState{
			{Task: map0, State: &storage.Handle{Name: "map-0", Checkpoint: 42, Size: 10, CRC: 0xdeadbeef}, Watermark: -5},
			{Task: sink0, Inline: []byte{0, 1, 2, 255}, Committables: []Committable{{PreparedAt: 41, Data: []byte("a")}, {PreparedAt: 42, Data: []byte{0}}},
				Alignment: 3 * time.Millisecond, SyncDuration: time.Microsecond, AsyncDuration: time.Second},
			{Task: src0, Inline: []byte("offset=9"), Watermark: 1 << 40},
		},
		Commits: []Commit{
			{Checkpoint: 40, Sink: "sink", Committables: [][]byte{[]byte("x")}},
			{Checkpoint: 42, Sink: "sink", Committables: [][]byte{[]byte("a"), {0}}},
		},
	}
	b, err := m.Encode()
	if err != nil {
		t.Fatal(err)
	}
	got, err := DecodeMetadata(b)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, m) {
		t.Fatalf("round trip changed the metadata:\n got %+v\nwant %+v", got, m)
	}
}

// DecodeMetadata sorts tasks, so Metadata.Task works on files whose tasks
// were written in any order.
func TestDecodeMetadata_SortsTasks(t *testing.T) {
	m := &Metadata{Version: MetadataVersion, ID: 3, Tasks: []SubtaskState{{Task: src0}, {Task: map0}, {Task: sink1}, {Task: sink0}}}
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	got, err := DecodeMetadata(b)
	if err != nil {
		t.Fatal(err)
	}
	for _, task := range []TaskID{src0, map0, sink0, sink1} {
		if _, ok := got.Task(task); !ok {
			t.Fatalf("Task(%v) not found after decoding unsorted tasks %v", task, got.Tasks)
		}
	}
}

// MetadataVersion: "A reader refuses versions it does not know."
func TestDecodeMetadata_RejectsOtherVersionsAndGarbage(t *testing.T) {
	for _, v := range []int{0, MetadataVersion + 1, -1} {
		m := &Metadata{Version: v, ID: 5, Tasks: []SubtaskState{{Task: src0}}}
		b, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := DecodeMetadata(b); err == nil || !strings.Contains(err.Error(), "version") {
			t.Errorf("DecodeMetadata of version %d: err = %v, want a version error", v, err)
		}
	}
	for _, b := range []string{"", "{", "[]", `{"version":"1"}`} {
		if _, err := DecodeMetadata([]byte(b)); err == nil {
			t.Errorf("DecodeMetadata(%q) succeeded", b)
		}
	}
}

func TestMetadataReferencesAndSize(t *testing.T) {
	m := &Metadata{ID: 9, Tasks: []SubtaskState{
		{Task: TaskID{"w", 0}, State: &storage.Handle{Checkpoint: 9, Size: 10}, StateReused: 30,
			Shared: []storage.Handle{{Checkpoint: 7, Name: "b"}, {Checkpoint: 3, Name: "a"}, {Checkpoint: 7, Name: "a"}}},
		{Task: TaskID{"w", 1}, State: &storage.Handle{Checkpoint: 9, Size: 5}, Inline: []byte("ab"),
			Shared: []storage.Handle{{Checkpoint: 7, Name: "a"}, {Checkpoint: 9, Name: "own"}}},
	}}
	if got, want := m.References(), []int64{3, 7}; !slices.Equal(got, want) {
		t.Errorf("References() = %v, want %v", got, want)
	}
	// File by file, without repeats, without the checkpoint's own files.
	if got, want := m.SharedFiles(), []storage.FileRef{{Checkpoint: 3, Name: "a"}, {Checkpoint: 7, Name: "a"}, {Checkpoint: 7, Name: "b"}}; !slices.Equal(got, want) {
		t.Errorf("SharedFiles() = %v, want %v", got, want)
	}
	if got := m.Size(); got != 47 {
		t.Errorf("Size() = %d, want 47 (10+30+5+2)", got)
	}
}
