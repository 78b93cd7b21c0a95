// Command ingest runs, validates and inspects YAML pipelines.
//
//	ingest run pipeline.yaml
//	ingest validate pipeline.yaml
//	ingest checkpoints list pipeline.yaml
//	ingest dev kafka          # a throwaway broker for examples/kafka.yaml
//	ingest version
package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/ingest-engine/ingest/config"
	"github.com/ingest-engine/ingest/internal/failpoint"
	"github.com/ingest-engine/ingest/internal/gcfloor"
	"github.com/ingest-engine/ingest/internal/redact"
	"github.com/ingest-engine/ingest/runtime"
	"github.com/ingest-engine/ingest/storage/blob"
	"github.com/ingest-engine/ingest/stream"
)

// Exit codes.
const (
	exitFailed      = 1 // the pipeline failed and restarts did not help
	exitConfig      = 2 // the pipeline file is invalid
	exitInterrupted = 130
)

// exitError carries an exit code through cobra.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

func main() {
	gcfloor.Install(gcfloor.DefaultBallast)
	if err := failpoint.FromEnv(); err != nil {
		fmt.Fprintln(os.Stderr, "ingest:", err)
		os.Exit(exitConfig)
	}
	if err := rootCmd().Execute(); err != nil {
		// Errors are scrubbed where they are made; this is the last guard
		// for a connection string's password (see internal/redact).
		fmt.Fprintln(os.Stderr, "ingest:", redact.Text(err.Error()))
		var ee *exitError
		if errors.As(err, &ee) {
			os.Exit(ee.code)
		}
		os.Exit(exitConfig) // cobra usage errors
	}
}

// rootCmd is the ingest command with its subcommands.
func rootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:           "ingest",
		Short:         "Ingest Engine: stream processing with exact recovery",
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       buildVersion(), // --version
	}
	root.SetVersionTemplate("{{.Version}}")
	root.AddCommand(runCmd(), validateCmd(), checkpointsCmd(), nexmarkCmd(), benchCmd(), devCmd(), connectorsCmd(), versionCmd())
	for _, c := range taggedCommands {
		root.AddCommand(c())
	}
	return root
}

// taggedCommands are the subcommands of files built only with a build tag
// (iceberg.go: ingest iceberg, with -tags iceberg).
var taggedCommands []func() *cobra.Command

// exactArgs is cobra.ExactArgs(n) with the command's usage line in its
// error, so a missing FILE says how the command is written.
func exactArgs(n int) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) == n {
			return nil
		}
		what := "missing arguments"
		if len(args) > n {
			what = "too many arguments"
		}
		return fmt.Errorf("%s: %s takes %d, got %d\nusage: %s", what, cmd.CommandPath(), n, len(args), cmd.UseLine())
	}
}

func load(path string) (*config.Pipeline, error) {
	p, err := config.Load(path)
	if err != nil {
		return nil, &exitError{code: exitConfig, err: err}
	}
	return p, nil
}

// describe renders the plan, the checkpoint and restart settings, the
// delivery guarantee (its level, then one line a reason) and the warnings,
// as validate prints them and run prints them at start, with every secret
// of the pipeline's connection strings masked.
func describe(p *config.Pipeline) string {
	plan, _ := p.Stream.Plan()
	o := p.Checkpoint
	interval := o.Interval.String()
	if o.Interval == 0 {
		interval = "off (final checkpoint only)"
	}
	s := fmt.Sprintf("pipeline %s\n%sphysical plan: %s"+
		"checkpoints: every %s, mode %s, timeout %s, min pause %s, max concurrent %d, tolerable failures %d, retain %d, in %s\n"+
		"restarts: %s\n",
		p.Name, plan.Describe(), plan.Physical(), interval, o.Mode, o.Timeout, o.MinPause, o.MaxConcurrent, o.TolerableFailures, o.Retain,
		p.CheckpointDir, p.Restart)
	lines := p.Delivery().Lines()
	s += "delivery guarantee: " + lines[0]
	if p.Require != runtime.DeliveryNone {
		s += fmt.Sprintf(" (checkpoint.require: %s)", p.Require)
	}
	s += "\n"
	for _, reason := range lines[1:] {
		s += "  " + reason + "\n"
	}
	// Warnings do not fail validation; run prints them at start with the plan.
	for _, w := range p.Warnings {
		s += "warning: " + w.String() + "\n"
	}
	return p.Redact(s)
}

func validateCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "validate FILE",
		Short: "Check a pipeline file and print its plan and delivery guarantee",
		Args:  exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			p, err := load(args[0])
			if err != nil {
				return err
			}
			fmt.Fprint(cmd.OutOrStdout(), describe(p))
			return nil
		},
	}
}

// explained prints the plan of a SQL script's EXPLAIN, which runs nothing.
func explained(cmd *cobra.Command, p *config.Pipeline) {
	fmt.Fprint(cmd.OutOrStdout(), describe(p))
	fmt.Fprintln(cmd.OutOrStdout(), "EXPLAIN: the plan above is printed; nothing runs (remove EXPLAIN to run it)")
}

func runCmd() *cobra.Command {
	var allowDuplicates, allowNonRestored, acceptLost bool
	var srv serving // serve.go: --http, --log-format, progress
	cmd := &cobra.Command{
		Use:   "run FILE",
		Short: "Run a pipeline; it resumes from its latest complete checkpoint",
		Long: `Run a pipeline. On start it recovers from the latest complete checkpoint in
the checkpoint directory. SIGINT or SIGTERM stops the sources, takes a final
checkpoint, commits and exits 0; a second signal exits at once (the next start
recovers).

Every file of the checkpoint is verified before any state is used. A damaged
newest checkpoint is skipped in favour of the previous complete one only when
no sink has published output of the damaged one; otherwise the run is refused
with an explanation, and --allow-duplicates falls back anyway (that output is
published again). State of operators the pipeline no longer has is refused
unless --allow-non-restored-state drops it.`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			p, err := load(args[0])
			if err != nil {
				return err
			}
			if p.Explain {
				explained(cmd, p)
				return nil
			}
			stderr := srv.output(cmd.ErrOrStderr(), os.Stdout, p.WritesStdout) // the stdout sink prints to os.Stdout
			log := slog.New(srv.logHandler(stderr, &slog.HandlerOptions{Level: slog.LevelInfo, ReplaceAttr: redactAttr(p)}))
			fmt.Fprint(stderr, describe(p))
			opts := withLog(p, log)
			opts.AllowDuplicates, opts.AllowNonRestoredState, opts.AcceptLostOutput = allowDuplicates, allowNonRestored, acceptLost
			job, err := p.Stream.NewJob(opts)
			if err != nil {
				return &exitError{code: exitConfig, err: p.RedactError(err)}
			}
			stopServing, err := srv.start(job, p, log)
			if err != nil {
				return &exitError{code: exitConfig, err: err}
			}
			defer stopServing()
			signals := make(chan os.Signal, 2)
			signal.Notify(signals, os.Interrupt, syscall.SIGTERM)
			go func() {
				s := <-signals
				log.Info("stopping: final checkpoint, then exit; signal again to exit at once", "signal", s.String())
				job.Stop()
				<-signals
				fmt.Fprintln(os.Stderr, "ingest: second signal: exiting at once; the next start recovers from the latest complete checkpoint")
				os.Exit(exitInterrupted)
			}()
			if err := job.Run(context.Background()); err != nil {
				return &exitError{code: exitFailed, err: withRemedy(p.RedactError(err))}
			}
			logFinished(log, job.Stats(), job.Observe()) // summary.go
			return nil
		},
	}
	cmd.Flags().BoolVar(&allowDuplicates, "allow-duplicates", false,
		"restore an older checkpoint than what a sink already published (a damaged, deleted or lost newest checkpoint), publishing that output again (at-least-once for this recovery)")
	cmd.Flags().BoolVar(&acceptLost, "accept-lost-output", false,
		"publish what is left of staged sink output that was deleted or damaged outside the engine, logging each file left out, instead of stopping (data loss, accepted)")
	cmd.Flags().BoolVar(&allowNonRestored, "allow-non-restored-state", false,
		"drop the checkpointed state of operators the pipeline no longer has instead of refusing to start")
	srv.flags(cmd.Flags())
	return cmd
}

// withRemedy adds to the error that ended a run what to do about it, when
// that is known: a bad input record fails the job at every restart until
// the source skips or dead-letters it.
func withRemedy(err error) error {
	var bad *stream.BadRecordError
	if !errors.As(err, &bad) {
		return err
	}
	src, dl := "the source", "SOURCE."+stream.DeadLetterOutput
	if bad.Source != "" {
		src, dl = "source "+bad.Source, bad.Source+"."+stream.DeadLetterOutput
	}
	return fmt.Errorf("%w\nthe failure is a bad input record, read again at every restart: to go on without it, set on_error: skip "+
		"(drop and count bad records) or on_error: dead_letter (send them to a sink with input: %s) on %s (docs/yaml.md, \"Bad input\")", err, dl, src)
}

// redactAttr masks the secrets of p's connection strings in every message,
// string and error the job logs.
func redactAttr(p *config.Pipeline) func([]string, slog.Attr) slog.Attr {
	return func(_ []string, a slog.Attr) slog.Attr {
		switch a.Value.Kind() {
		case slog.KindString:
			a.Value = slog.StringValue(p.Redact(a.Value.String()))
		case slog.KindAny:
			switch v := a.Value.Any().(type) {
			case error:
				a.Value = slog.StringValue(p.Redact(v.Error()))
			case fmt.Stringer:
				a.Value = slog.StringValue(p.Redact(v.String()))
			}
		}
		return a
	}
}

func withLog(p *config.Pipeline, log *slog.Logger) stream.RunOptions {
	o := p.RunOptions()
	o.Log = log
	return o
}

func checkpointsCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "checkpoints", Short: "Inspect a pipeline's checkpoints"}
	cmd.AddCommand(&cobra.Command{
		Use:   "list FILE",
		Short: "List the checkpoints of a pipeline, newest last",
		Args:  exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			p, err := load(args[0])
			if err != nil {
				return err
			}
			return listCheckpoints(cmd.Context(), cmd, p)
		},
	})
	cmd.AddCommand(inspectCheckpointCmd(), deleteCheckpointCmd()) // checkpoints.go
	return cmd
}

func listCheckpoints(ctx context.Context, cmd *cobra.Command, p *config.Pipeline) error {
	if ctx == nil {
		ctx = context.Background()
	}
	if _, err := os.Stat(p.CheckpointDir); !blob.IsURL(p.CheckpointDir) && errors.Is(err, os.ErrNotExist) {
		fmt.Fprintf(cmd.OutOrStdout(), "no checkpoints: %s does not exist\n", p.Redact(p.CheckpointDir))
		return nil
	}
	st, err := blob.OpenStorage(ctx, p.CheckpointDir)
	if err != nil {
		return &exitError{code: exitFailed, err: p.RedactError(err)}
	}
	entries, err := st.List(ctx)
	if err != nil {
		return &exitError{code: exitFailed, err: p.RedactError(err)}
	}
	if len(entries) == 0 {
		fmt.Fprintf(cmd.OutOrStdout(), "no checkpoints in %s\n", p.Redact(p.CheckpointDir))
		return nil
	}
	metas, unreadable := readAllMetadata(ctx, st, entries)
	held := heldFor(metas)
	w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "ID\tSTATUS\tCOMPLETED\tDURATION\tSTATE SIZE\tTASKS\tCOMMITS")
	for _, e := range entries {
		if !e.Complete {
			status := "incomplete"
			if h := held[e.ID]; h != nil {
				status = "trimmed: " + h.String()
			}
			fmt.Fprintf(w, "%d\t%s\t-\t-\t-\t-\t-\n", e.ID, status)
			continue
		}
		m := metas[e.ID]
		if m == nil {
			fmt.Fprintf(w, "%d\tunreadable: %v\t-\t-\t-\t-\t-\n", e.ID, p.RedactError(unreadable[e.ID]))
			continue
		}
		status := "complete"
		if m.Final {
			status = "complete (final)"
		}
		fmt.Fprintf(w, "%d\t%s\t%s\t%s\t%d B\t%d\t%d\n", m.ID, status, m.CompletedAt.UTC().Format(time.RFC3339Nano),
			m.CompletedAt.Sub(m.TriggeredAt).Round(time.Microsecond), m.Size(), len(m.Tasks), len(m.Commits))
	}
	return w.Flush()
}
