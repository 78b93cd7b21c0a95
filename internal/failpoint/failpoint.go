// Package failpoint lets tests fail or stall the engine at named points of the
// checkpoint protocol. A disabled failpoint costs one atomic load.
//
// Points used by the engine, in protocol order (docs/reliability.md,
// "Failpoints", names the test that crashes at each):
//
//	task/process-batch                 before a subtask reading channels processes a batch
//	task/before-snapshot               a subtask has the barrier (aligned), before its synchronous snapshot
//	task/after-sync-snapshot           the synchronous snapshot is taken, before the barrier goes downstream
//	task/during-async-write            the keyed state is encoded, before it is written to storage
//	task/after-snapshot-before-ack     a subtask wrote its snapshot, before it acknowledges
//	task/after-ack                     a subtask acknowledged the checkpoint
//	job/before-metadata-write          every subtask acknowledged, before the metadata is written
//	job/after-metadata-before-notify   the checkpoint is complete, before the subtasks are notified
//	job/after-metadata-before-commit   the checkpoint is complete, before its output is committed
//	job/after-commit-before-cleanup    the output is committed, before older checkpoints are deleted
//	storage/discard-mid-delete         a discarded checkpoint's metadata is deleted, its files not yet
//	sink/file/prepare                  when the file sink stages its file at a barrier (after fsync)
//	sink/file/mid-commit               between moving two staged files of one commit
//	sink/file/mid-abandon              between deleting two abandoned staged files at a recovery
//	sink/kafka/prepare                 a Kafka sink subtask flushed its transaction at a barrier, before it returns the committable
//	sink/kafka/mid-commit              between committing two subtasks' transactions of one commit
//	sink/postgres/prepare              a PostgreSQL sink subtask's staged rows are durable, before it acknowledges
//	sink/postgres/mid-commit           inside the publishing transaction, before COMMIT
//	source/postgres_cdc/snapshot-chunk before the CDC source reads a snapshot chunk
//	source/postgres_cdc/confirm        a checkpoint is complete, before the CDC source confirms the slot to it
//
// Production binaries carry them inert: until INGEST_FAILPOINTS or Enable
// sets one, Inject is one atomic load and returns nil.
//
// In a process, tests call Enable. The ingest binary also reads the
// INGEST_FAILPOINTS environment variable (see FromEnv), so out-of-process
// crash tests can widen a window and kill the process inside it.
package failpoint

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

var (
	enabled atomic.Bool
	mu      sync.Mutex
	points  = map[string]func() error{}
)

// ErrInjected is the error an "error" failpoint returns.
var ErrInjected = errors.New("injected failure")

// Inject runs the action enabled for point name and returns its error; nil
// when the point is not enabled.
func Inject(name string) error {
	if !enabled.Load() {
		return nil
	}
	mu.Lock()
	f := points[name]
	mu.Unlock()
	if f == nil {
		return nil
	}
	return f()
}

// Enable sets the action of point name until the returned function is called.
func Enable(name string, action func() error) (disable func()) {
	mu.Lock()
	points[name] = action
	enabled.Store(true)
	mu.Unlock()
	return func() {
		mu.Lock()
		delete(points, name)
		enabled.Store(len(points) > 0)
		mu.Unlock()
	}
}

// FromEnv enables the failpoints listed in INGEST_FAILPOINTS:
// "name=action;name=action", where action is one of
//
//	error        return ErrInjected (the job fails and restarts)
//	sleep(D)     sleep for duration D
//	pause(D)     print "failpoint NAME reached" to stderr, then sleep D
//	             (a test that reads stderr kills the process inside the pause)
//	exit(CODE)   exit the process at once with CODE
func FromEnv() error {
	spec := os.Getenv("INGEST_FAILPOINTS")
	if spec == "" {
		return nil
	}
	for _, item := range strings.Split(spec, ";") {
		name, action, ok := strings.Cut(strings.TrimSpace(item), "=")
		if !ok {
			return fmt.Errorf("INGEST_FAILPOINTS: %q is not name=action", item)
		}
		f, err := parseAction(name, action)
		if err != nil {
			return fmt.Errorf("INGEST_FAILPOINTS: %s: %w", name, err)
		}
		Enable(name, f)
	}
	return nil
}

func parseAction(name, action string) (func() error, error) {
	verb, arg, _ := strings.Cut(strings.TrimSuffix(action, ")"), "(")
	switch verb {
	case "error":
		return func() error { return fmt.Errorf("failpoint %s: %w", name, ErrInjected) }, nil
	case "sleep", "pause":
		d, err := time.ParseDuration(arg)
		if err != nil {
			return nil, fmt.Errorf("%s needs a duration: %w", verb, err)
		}
		announce := verb == "pause"
		return func() error {
			if announce {
				fmt.Fprintf(os.Stderr, "failpoint %s reached\n", name)
			}
			time.Sleep(d)
			return nil
		}, nil
	case "exit":
		code, err := strconv.Atoi(arg)
		if err != nil {
			return nil, fmt.Errorf("exit needs a code: %w", err)
		}
		return func() error { os.Exit(code); return nil }, nil
	}
	return nil, fmt.Errorf("unknown action %q: want error, sleep(D), pause(D) or exit(CODE)", action)
}
