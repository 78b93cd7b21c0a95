package storagetest

import (
	"context"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ingest-engine/ingest/internal/testkit"
)

// checkpointing.txt: "Monitor at least: … State size and checkpoint-storage
// latency" — a storage call that hangs is reported while it hangs: a WARN
// naming the call and the directory once it is outstanding longer than the
// threshold, and an INFO when it returns. (#12 item 4d)
func TestLocalReportsAHangingCall(t *testing.T) {
	f := NewFaultFS(nil)
	dir := filepath.Join(t.TempDir(), "ck")
	l, err := f.NewLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	var log testkit.SyncBuffer
	l.ReportSlowCalls(slog.New(slog.NewTextHandler(&log, nil)), 20*time.Millisecond)

	// A fast call is not reported.
	if _, err := l.List(context.Background()); err != nil {
		t.Fatal(err)
	}
	release := make(chan struct{})
	f.FailWhen(func(op FSOp, path string) error {
		if op == FSSync && strings.Contains(path, ".tmp-_metadata") {
			<-release // the disk hangs in the metadata's fsync
		}
		return nil
	})
	done := make(chan error, 1)
	go func() { done <- l.WriteMetadata(context.Background(), 1, []byte("m")) }()
	warn := log.WaitLine(t, "level=WARN", "storage call has not returned", `call="write metadata of checkpoint 1"`, "storage="+dir)
	t.Log(warn)
	if strings.Contains(log.String(), "list checkpoints") {
		t.Errorf("a call that returned at once was reported:\n%s", log.String())
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	log.WaitLine(t, "level=INFO", "storage call returned", `call="write metadata of checkpoint 1"`, "storage="+dir, "elapsed=")
}
