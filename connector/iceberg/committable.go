//go:build iceberg

package iceberg

import (
	"encoding/json"
	"fmt"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/codec"
	"github.com/apache/iceberg-go/table"
)

// pendingFile is a data or equality delete file a subtask closed at the
// barrier of checkpoint PreparedAt, as a committable carries it: the file's
// manifest entry (Avro, as codec.EncodeDataFile writes it) with the ids of
// the schema and partition spec it was written with and the table format
// version, which decoding needs.
type pendingFile struct {
	PreparedAt int64  `json:"prepared_at"`
	Path       string `json:"path"`
	Deletes    bool   `json:"deletes,omitempty"`
	Schema     int    `json:"schema"`
	Spec       int    `json:"spec"`
	Format     int    `json:"format"`
	Entry      []byte `json:"entry"`
}

func newPendingFile(f iceberg.DataFile, preparedAt int64, meta table.Metadata) (pendingFile, error) {
	spec := meta.PartitionSpecByID(int(f.SpecID()))
	if spec == nil {
		return pendingFile{}, fmt.Errorf("file %s: its partition spec %d is not the table's", f.FilePath(), f.SpecID())
	}
	sch := meta.CurrentSchema()
	entry, err := codec.EncodeDataFile(f, *spec, sch, meta.Version())
	if err != nil {
		return pendingFile{}, fmt.Errorf("file %s: %w", f.FilePath(), err)
	}
	return pendingFile{
		PreparedAt: preparedAt, Path: f.FilePath(), Deletes: f.ContentType() == iceberg.EntryContentEqDeletes,
		Schema: sch.ID, Spec: spec.ID(), Format: meta.Version(), Entry: entry,
	}, nil
}

// dataFile decodes the file's manifest entry against the table's metadata.
func (p pendingFile) dataFile(meta table.Metadata) (iceberg.DataFile, error) {
	spec := meta.PartitionSpecByID(p.Spec)
	var sch *iceberg.Schema
	for _, s := range meta.Schemas() {
		if s.ID == p.Schema {
			sch = s
		}
	}
	if spec == nil || sch == nil {
		return nil, fmt.Errorf("file %s was written with schema %d and partition spec %d, which the table no longer has", p.Path, p.Schema, p.Spec)
	}
	f, err := codec.DecodeDataFile(p.Entry, *spec, sch, p.Format)
	if err != nil {
		return nil, fmt.Errorf("file %s: %w", p.Path, err)
	}
	if f.FilePath() != p.Path {
		return nil, fmt.Errorf("file %s: its entry names %s", p.Path, f.FilePath())
	}
	return f, nil
}

// committable is what one committable holds: every file its subtask had not
// seen published at the barrier.
type committable struct {
	Files []pendingFile `json:"files"`
}

func encodeCommittable(files []pendingFile) ([]byte, error) {
	return json.Marshal(committable{Files: files})
}

func decodeCommittable(data []byte) ([]pendingFile, error) {
	var c committable
	if err := json.Unmarshal(data, &c); err != nil {
		return nil, fmt.Errorf("committable: %w", err)
	}
	for _, f := range c.Files {
		if f.Path == "" || f.PreparedAt <= 0 || len(f.Entry) == 0 {
			return nil, fmt.Errorf("committable names a file without path, checkpoint or entry: %q", f.Path)
		}
	}
	return c.Files, nil
}
