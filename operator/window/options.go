package window

import (
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/ingest-engine/ingest/runtime"
	"github.com/ingest-engine/ingest/stream"
)

// Window options are stream.NodeOptions, so they mix with node options in a
// window builder's trailing arguments:
//
//	window.Tumbling(ks, "per_key", time.Minute, agg, out,
//		stream.Parallelism(4), window.AllowedLateness(10*time.Second), window.LateRecordsTo("late"))
//
// A window option writes the settings of the window node being built; given
// to any other node it does nothing.

// AllowedLateness keeps a window's state until the watermark reaches the
// window's MaxTimestamp + d, Flink's allowedLateness. A record arriving after
// its window fired but within d updates the window, which fires again at
// once with the updated accumulator: consumers see one result per firing, the
// last one complete. Records arriving later are late (see LateRecordsTo).
// The cost is state: windows stay open d longer. It must not be negative.
// The default value is 0: a window fires once, and its state goes when it
// fires.
func AllowedLateness(d time.Duration) stream.NodeOption {
	return configure(func(s *settings) { s.lateness = d })
}

// LateRecordsTo sends late records (every window of theirs reached
// MaxTimestamp + allowed lateness) unchanged, with their event times, to the
// window node's side output name, which stream.SideOutput[T](windowed, name)
// connects downstream; T is the window's input type. When nothing consumes
// the side output they are dropped and counted. The default is to drop and
// count them (see LateCounter), Flink's default.
func LateRecordsTo(name string) stream.NodeOption {
	return configure(func(s *settings) { s.lateOutput, s.lateOutputSet = name, true })
}

// LateCounter is implemented by every window operator subtask: the number of
// late records since the subtask opened, dropped or sent to the late side
// output. A subtask also logs its counts when it closes. The counts are not
// checkpointed: they start from zero in every attempt (the runtime's count
// of drops, Observation.LateRecords, spans the job's attempts).
type LateCounter interface {
	LateRecords() (dropped, sideOutput int64)
}

// settings are the window options of one operator.
type settings struct {
	// lateness is the allowed lateness.
	lateness time.Duration
	// lateOutput is the side output for late records; "" drops them.
	lateOutput string
	// lateOutputSet records that LateRecordsTo was given, so an empty name
	// is reported instead of meaning "drop".
	lateOutputSet bool
}

// building maps the window nodes being built (between a builder's start and
// the return of its stream.Add) to their settings, which is how a window
// option, a func(*runtime.Node), finds them. It holds a node only for the
// duration of its builder call.
var building sync.Map // *runtime.Node → *settings

// configure returns the node option that applies f to the settings of the
// window node it is applied to.
func configure(f func(*settings)) stream.NodeOption {
	return func(n *runtime.Node) {
		if s, ok := building.Load(n); ok {
			f(s.(*settings))
		}
	}
}

// addNode adds window node n fed by s, applying opts; cfg receives the window
// options among them (n.NewOperator reads it when it creates an operator).
// It then validates the settings, declares the late side output and completes
// the node's description.
func addNode[T, O any](s stream.Stream[T], n *runtime.Node, cfg *settings, opts []stream.NodeOption) stream.Stream[O] {
	n.DropsLate = true // without a connected side output (see lateRecords)
	building.Store(n, cfg)
	out := stream.Add[T, O](s, n, opts...)
	building.Delete(n)
	if cfg.lateness < 0 {
		s.Pipeline().Errorf("window %s: allowed lateness %v is negative", n.ID, cfg.lateness)
	}
	if cfg.lateOutputSet && cfg.lateOutput == "" {
		s.Pipeline().Errorf("window %s: the side output for late records has an empty name", n.ID)
	}
	var desc []string
	if cfg.lateness > 0 {
		desc = append(desc, fmt.Sprintf("allowed lateness %v", cfg.lateness))
	}
	if cfg.lateOutput != "" {
		n.SideOutputs = append(n.SideOutputs, cfg.lateOutput)
		desc = append(desc, fmt.Sprintf("late records to side output %q", cfg.lateOutput))
	}
	if len(desc) > 0 {
		n.Describe += ", " + strings.Join(desc, ", ")
	}
	return out
}
