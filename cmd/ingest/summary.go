package main

import (
	"log/slog"
	"slices"
	"strconv"
	"strings"

	"github.com/ingest-engine/ingest/runtime"
)

// logFinished logs the summary of a run that ended: its last checkpoint, its
// restarts and the late records each operator that can drop them dropped
// (at 0 too, so the line always says). Late records are input the output
// does not reflect, so a run that dropped any ends with a warning.
func logFinished(log *slog.Logger, st runtime.Stats, o runtime.Observation) {
	ops := make([]string, 0, len(o.LateRecords))
	var total int64
	for op, n := range o.LateRecords {
		ops = append(ops, op)
		total += n
	}
	slices.Sort(ops)
	late := make([]any, len(ops))
	for i, op := range ops {
		late[i] = slog.Int64(op, o.LateRecords[op])
	}
	attrs := []any{"checkpoint", st.Latest, "restarts", st.Restarts, slog.Group("late_records_dropped", late...)}
	if total == 0 {
		log.Info("pipeline finished", attrs...)
		return
	}
	log.Warn("pipeline finished, but operators dropped "+plural(total, "late record")+", which the output does not reflect ("+
		strings.Join(ops, ", ")+"; see ingest_late_records_total and the warnings above)", attrs...)
}

// plural renders n things.
func plural(n int64, thing string) string {
	if n == 1 {
		return "1 " + thing
	}
	return strconv.FormatInt(n, 10) + " " + thing + "s"
}
