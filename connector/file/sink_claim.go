package file

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/ingest-engine/ingest/runtime"
)

// ownerName is the marker in a sink's directory that names the sink that
// owns it (runtime.DestinationClaimer). Its name starts with '_', so readers
// of the committed output skip it.
const ownerName = "_ingest_sink.json"

// owner is the content of ownerName.
type owner struct {
	Pipeline string `json:"pipeline"`
	Sink     string `json:"sink"`
	Job      string `json:"job"`
}

// Claim makes the sink's directory this sink's: a directory without a marker
// (new, or written by an older version) is marked; one marked by another
// pipeline or sink is refused, since recovery deletes everything staged
// under it (Abandon). It returns the job the marker names when it is not
// jobID.
func (c committer) Claim(_ context.Context, pipeline, sink, jobID string) (string, error) {
	path := filepath.Join(c.dir, ownerName)
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return "", c.writeOwner(owner{Pipeline: pipeline, Sink: sink, Job: jobID})
	}
	if err != nil {
		return "", fmt.Errorf("file sink: reading the owner of %s: %w", c.dir, err)
	}
	var o owner
	if err := json.Unmarshal(data, &o); err != nil || o.Pipeline == "" {
		return "", fmt.Errorf("file sink: %s does not say which pipeline owns %s (%v): restore or delete it (%w)", path, c.dir, err, runtime.ErrUnrecoverable)
	}
	if o.Pipeline != pipeline || o.Sink != sink {
		return "", fmt.Errorf("file sink: %s belongs to sink %q of pipeline %q (%s), not to sink %q of pipeline %q: two sinks writing one path would delete each other's staged output at recovery. "+
			"Give each sink its own path; if that pipeline is gone for good and the output is to be kept, delete %s (%w)",
			c.dir, o.Sink, o.Pipeline, path, sink, pipeline, path, runtime.ErrUnrecoverable)
	}
	if o.Job == jobID {
		return "", nil
	}
	return o.Job, nil
}

// Reclaim records jobID as the directory's owning job.
func (c committer) Reclaim(_ context.Context, pipeline, sink, jobID string) error {
	return c.writeOwner(owner{Pipeline: pipeline, Sink: sink, Job: jobID})
}

// writeOwner replaces the marker atomically and durably.
func (c committer) writeOwner(o owner) error {
	if err := os.MkdirAll(c.dir, 0o755); err != nil {
		return fmt.Errorf("file sink: %w", err)
	}
	data, err := json.Marshal(o)
	if err != nil {
		return fmt.Errorf("file sink: encoding the owner marker: %w", err)
	}
	path := filepath.Join(c.dir, ownerName)
	tmp := filepath.Join(c.dir, "."+ownerName+".tmp")
	f, err := os.Create(tmp)
	if err != nil {
		return fmt.Errorf("file sink: %w", err)
	}
	_, err = f.Write(append(data, '\n'))
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err == nil {
		err = syncDir(c.dir)
	}
	if err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("file sink: marking %s as the sink's: %w", c.dir, err)
	}
	return nil
}
