package runtime

import (
	"context"
	"fmt"
	"log/slog"
)

// DestinationClaimer is implemented by committers whose destination must
// belong to one sink of one pipeline: recovery abandons whatever the
// destination holds staged (Committer.Abandon), which would delete another
// pipeline's output, and a job that publishes where another job of the same
// pipeline already published would publish that output again.
type DestinationClaimer interface {
	// Claim makes sure the destination belongs to sink of pipeline, and
	// takes it when it belongs to nobody (marking it with pipeline, sink and
	// jobID). It returns the job recorded as the destination's owner when
	// that is not jobID, and "" otherwise. A destination of another pipeline
	// or sink is an error wrapping ErrUnrecoverable that names the owner.
	Claim(ctx context.Context, pipeline, sink, jobID string) (previous string, err error)
	// Reclaim records jobID as the owner of the destination in place of
	// previous, once recovery decided that the job may take it over.
	Reclaim(ctx context.Context, pipeline, sink, jobID string) error
}

// claimDestinations runs Claim on every claiming committer before anything
// is published or abandoned. A destination another job of this pipeline
// owns is taken over only when that job published nothing there, or with
// AllowDuplicates: otherwise its output (a run whose checkpoints and ledger
// were deleted, or another checkpoint storage running the same pipeline)
// would be published a second time by this job.
func (j *Job) claimDestinations(ctx context.Context, rec *recovery) error {
	for _, n := range j.plan.Nodes {
		cl, ok := n.Committer.(DestinationClaimer)
		if !ok {
			continue
		}
		prev, err := cl.Claim(j.commitContext(ctx), j.plan.Name, n.ID, rec.jobID)
		if err != nil {
			return fmt.Errorf("sink %s: %w", n.ID, err)
		}
		if prev == "" {
			continue
		}
		var last int64
		if tr, ok := n.Committer.(CommitTracker); ok {
			if last, err = tr.LastCommitted(ctx, prev, n.ID); err != nil {
				return fmt.Errorf("sink %s: finding what job %s, its destination's owner, published: %w", n.ID, prev, err)
			}
		}
		if last > 0 && !j.opts.AllowDuplicates {
			return incompatible(fmt.Errorf("sink %s: its destination holds the published output of job %s of pipeline %q, up to checkpoint %d, and this job (%s) knows nothing of it: "+
				"the checkpoints and ledger of that job in %s were deleted, or another checkpoint storage runs this pipeline. Starting here would publish that output again. "+
				"Restore that job's checkpoints, give the sink a new destination, delete its output, or run with --allow-duplicates (Options.AllowDuplicates) to take the destination over and publish that output a second time",
				n.ID, prev, j.plan.Name, last, rec.jobID, j.storage.Location()))
		}
		if last > 0 {
			j.log.Warn("taking over a destination another job of the pipeline published to; its output is published again (--allow-duplicates)", "sink", n.ID, "previous_job", prev, "published_up_to", last)
		}
		if err := cl.Reclaim(j.commitContext(ctx), j.plan.Name, n.ID, rec.jobID); err != nil {
			return fmt.Errorf("sink %s: %w", n.ID, err)
		}
	}
	return nil
}

// lostOutputKey is the context key of WithLostOutputAccepted.
type lostOutputKey struct{}

// WithLostOutputAccepted returns ctx marked so that committers publish what
// is left of a commit whose staged output is missing or damaged, logging
// each item they leave out, instead of failing (Options.AcceptLostOutput).
func WithLostOutputAccepted(ctx context.Context) context.Context {
	return context.WithValue(ctx, lostOutputKey{}, true)
}

// LostOutputAccepted reports whether ctx carries WithLostOutputAccepted.
func LostOutputAccepted(ctx context.Context) bool {
	ok, _ := ctx.Value(lostOutputKey{}).(bool)
	return ok
}

// publishNowKey is the context key of withPublishNow.
type publishNowKey struct{}

// withPublishNow marks ctx for PublishNow.
func withPublishNow(ctx context.Context) context.Context {
	return context.WithValue(ctx, publishNowKey{}, true)
}

// PublishNow reports whether a Commit must publish everything it is given
// at once: it re-publishes the recovery point at a recovery (the subtasks
// start afresh and never offer that output again), or it publishes the job's
// final checkpoint (nothing follows it). A committer that groups several
// checkpoints' output into one publication (a commit interval longer than
// the checkpoint interval) may hold a commit back only when PublishNow is
// false: its subtasks then offer the output again at their next barrier.
func PublishNow(ctx context.Context) bool {
	ok, _ := ctx.Value(publishNowKey{}).(bool)
	return ok
}

// loggerKey is the context key of WithLogger.
type loggerKey struct{}

// WithLogger returns ctx carrying log, the job's log, for connectors'
// committers to log what they decide (LoggerFrom).
func WithLogger(ctx context.Context, log *slog.Logger) context.Context {
	return context.WithValue(ctx, loggerKey{}, log)
}

// LoggerFrom returns the log WithLogger put in ctx, or one that discards
// everything.
func LoggerFrom(ctx context.Context) *slog.Logger {
	if l, ok := ctx.Value(loggerKey{}).(*slog.Logger); ok && l != nil {
		return l
	}
	return slog.New(slog.DiscardHandler)
}
