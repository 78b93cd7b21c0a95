package main

// This file holds `ingest checkpoints inspect` and `ingest checkpoints
// delete`: one checkpoint's content, and removing one by hand.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/ingest-engine/ingest/checkpoint"
	"github.com/ingest-engine/ingest/config"
	"github.com/ingest-engine/ingest/storage"
	"github.com/ingest-engine/ingest/storage/blob"
)

// inspectCheckpointCmd is `ingest checkpoints inspect FILE ID`.
func inspectCheckpointCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "inspect FILE ID",
		Short: "Show one checkpoint: status, topology, per-operator state size, source positions, pending committables",
		Args:  exactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			p, id, err := loadWithID(args)
			if err != nil {
				return err
			}
			return inspectCheckpoint(ctxOf(cmd), cmd.OutOrStdout(), p, id)
		},
	}
}

// deleteCheckpointCmd is `ingest checkpoints delete FILE ID [--force]`.
func deleteCheckpointCmd() *cobra.Command {
	var force bool
	cmd := &cobra.Command{
		Use:   "delete FILE ID",
		Short: "Delete one checkpoint; the newest complete one (the recovery point) only with --force",
		Long: `Delete everything stored for one checkpoint, in a local directory or at a
blob URL alike. The newest complete checkpoint is the point the next run
recovers from: deleting it needs --force, and the next run then recovers from
the complete checkpoint before it (replaying more input) or, with none left,
starts from the beginning. If a sink already published the deleted
checkpoint's output, that run is refused, since the replay would publish it
again, unless it is given --allow-duplicates. Checkpoint ids are never used
again: the storage's ledger remembers them. A checkpoint whose files a newer
complete checkpoint builds on (incremental snapshots) is never deleted, even
with --force: the command names the checkpoints that reference it. That
includes a checkpoint retention trimmed to such files (listed as "trimmed":
it has no metadata and is no recovery point). The
command refuses while a process running the pipeline holds the checkpoint
storage's lock.`,
		Args: exactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			p, id, err := loadWithID(args)
			if err != nil {
				return err
			}
			return deleteCheckpoint(ctxOf(cmd), cmd.OutOrStdout(), p, id, force)
		},
	}
	cmd.Flags().BoolVar(&force, "force", false,
		"delete the checkpoint even if it is the newest complete one, the recovery point")
	return cmd
}

// ctxOf returns the command's context, or Background when it has none.
func ctxOf(cmd *cobra.Command) context.Context {
	if ctx := cmd.Context(); ctx != nil {
		return ctx
	}
	return context.Background()
}

// loadWithID loads the pipeline file args[0] and parses the checkpoint id
// args[1] (the FILE ID arguments of inspect and delete).
func loadWithID(args []string) (*config.Pipeline, int64, error) {
	p, err := load(args[0])
	if err != nil {
		return nil, 0, err
	}
	id, err := parseCheckpointID(args[1])
	if err != nil {
		return nil, 0, err
	}
	return p, id, nil
}

// parseCheckpointID parses a checkpoint id argument.
func parseCheckpointID(s string) (int64, error) {
	id, err := strconv.ParseInt(s, 10, 64)
	if err != nil || id < 0 {
		return 0, &exitError{code: exitConfig, err: fmt.Errorf("checkpoint id %q: must be a non-negative integer", s)}
	}
	return id, nil
}

// openCheckpoints opens p's checkpoint storage and lists it. A local
// directory that does not exist is reported as such, not created.
func openCheckpoints(ctx context.Context, p *config.Pipeline) (storage.Storage, []storage.Entry, error) {
	if _, err := os.Stat(p.CheckpointDir); !blob.IsURL(p.CheckpointDir) && errors.Is(err, os.ErrNotExist) {
		return nil, nil, &exitError{code: exitFailed, err: fmt.Errorf("no checkpoints: %s does not exist", p.Redact(p.CheckpointDir))}
	}
	st, err := blob.OpenStorage(ctx, p.CheckpointDir)
	if err != nil {
		return nil, nil, &exitError{code: exitFailed, err: p.RedactError(err)}
	}
	entries, err := st.List(ctx)
	if err != nil {
		closeStorage(st)
		return nil, nil, &exitError{code: exitFailed, err: p.RedactError(err)}
	}
	return st, entries, nil
}

// closeStorage releases what st holds (a blob bucket), if anything.
func closeStorage(st storage.Storage) {
	if c, ok := st.(io.Closer); ok {
		c.Close()
	}
}

// findEntry returns the entry of checkpoint id.
func findEntry(entries []storage.Entry, id int64) (storage.Entry, bool) {
	i := slices.IndexFunc(entries, func(e storage.Entry) bool { return e.ID == id })
	if i < 0 {
		return storage.Entry{}, false
	}
	return entries[i], true
}

// noSuchCheckpoint is the error for an id storage does not hold.
func noSuchCheckpoint(p *config.Pipeline, id int64) error {
	return &exitError{code: exitFailed, err: fmt.Errorf("checkpoint %d not found in %s (see `ingest checkpoints list`)", id, p.Redact(p.CheckpointDir))}
}

// newestComplete returns the id of the newest checkpoint whose metadata
// reads and verifies (the one a run recovers from), -1 when there is none.
func newestComplete(ctx context.Context, st storage.Storage, entries []storage.Entry) int64 {
	for i := len(entries) - 1; i >= 0; i-- {
		if !entries[i].Complete {
			continue
		}
		if _, err := st.ReadMetadata(ctx, entries[i].ID); err == nil {
			return entries[i].ID
		}
	}
	return -1
}

// readAllMetadata reads and decodes the metadata of every complete checkpoint
// of entries; a checkpoint whose metadata does not read or decode is in
// unreadable, with the error, instead.
func readAllMetadata(ctx context.Context, st storage.Storage, entries []storage.Entry) (metas map[int64]*checkpoint.Metadata, unreadable map[int64]error) {
	metas, unreadable = map[int64]*checkpoint.Metadata{}, map[int64]error{}
	for _, e := range entries {
		if !e.Complete {
			continue
		}
		data, err := st.ReadMetadata(ctx, e.ID)
		if err == nil {
			var m *checkpoint.Metadata
			if m, err = checkpoint.DecodeMetadata(data); err == nil {
				metas[e.ID] = m
				continue
			}
		}
		unreadable[e.ID] = err
	}
	return metas, unreadable
}

// holders says why a checkpoint stays in storage although retention let it
// go: complete checkpoints build on some of its files (incremental
// snapshots), and retention trimmed it to them (its metadata went first: it
// is no recovery point).
type holders struct {
	// files are the names of its files that complete checkpoints reference.
	files map[string]bool
	// by are those complete checkpoints, increasing.
	by []int64
}

// String says what is kept and for whom, e.g. "kept for 3 files referenced
// by checkpoint 12".
func (h *holders) String() string {
	noun := "files"
	if len(h.files) == 1 {
		noun = "file"
	}
	by := make([]string, len(h.by))
	for i, id := range h.by {
		by[i] = strconv.FormatInt(id, 10)
	}
	s := "checkpoint "
	if len(by) > 1 {
		s = "checkpoints "
	}
	return fmt.Sprintf("kept for %d %s referenced by %s%s", len(h.files), noun, s, strings.Join(by, ", "))
}

// heldFor returns, for every checkpoint whose files the checkpoints of metas
// reference (Metadata.SharedFiles), what they reference of it and which do.
func heldFor(metas map[int64]*checkpoint.Metadata) map[int64]*holders {
	held := map[int64]*holders{}
	ids := slices.Sorted(maps.Keys(metas))
	for _, id := range ids {
		for _, f := range metas[id].SharedFiles() {
			h := held[f.Checkpoint]
			if h == nil {
				h = &holders{files: map[string]bool{}}
				held[f.Checkpoint] = h
			}
			h.files[f.Name] = true
			if !slices.Contains(h.by, id) {
				h.by = append(h.by, id)
			}
		}
	}
	return held
}

// inspectCheckpoint prints checkpoint id of p to w.
func inspectCheckpoint(ctx context.Context, w io.Writer, p *config.Pipeline, id int64) error {
	st, entries, err := openCheckpoints(ctx, p)
	if err != nil {
		return err
	}
	defer closeStorage(st)
	e, ok := findEntry(entries, id)
	if !ok {
		return noSuchCheckpoint(p, id)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "checkpoint %d in %s\n", id, e.Path)
	if !e.Complete {
		metas, _ := readAllMetadata(ctx, st, entries)
		if h := heldFor(metas)[id]; h != nil {
			fmt.Fprintf(&b, "status: trimmed (no metadata: not a recovery point; retention keeps only the files newer checkpoints build on): %s\n", h)
			names := slices.Sorted(maps.Keys(h.files))
			const show = 20
			for _, n := range names[:min(len(names), show)] {
				fmt.Fprintf(&b, "  %s\n", n)
			}
			if len(names) > show {
				fmt.Fprintf(&b, "  … and %d more\n", len(names)-show)
			}
		} else {
			b.WriteString("status: incomplete (no metadata: it never completed, or is in flight)\n")
		}
		_, err := io.WriteString(w, p.Redact(b.String()))
		return err
	}
	data, err := st.ReadMetadata(ctx, id)
	if err != nil {
		return &exitError{code: exitFailed, err: p.RedactError(fmt.Errorf("checkpoint %d: reading metadata: %w", id, err))}
	}
	m, err := checkpoint.DecodeMetadata(data)
	if err != nil {
		return &exitError{code: exitFailed, err: p.RedactError(fmt.Errorf("checkpoint %d: %w", id, err))}
	}
	writeInspection(&b, m, newestComplete(ctx, st, entries) == id)
	_, err = io.WriteString(w, p.Redact(b.String()))
	return err
}

// writeInspection renders the metadata of a complete checkpoint; newest says
// whether it is the recovery point.
func writeInspection(b *strings.Builder, m *checkpoint.Metadata, newest bool) {
	status := "complete"
	if m.Final {
		status += " (final)"
	}
	if newest {
		status += ", newest: the recovery point"
	}
	fmt.Fprintf(b, "status: %s\n", status)
	fmt.Fprintf(b, "pipeline: %s (job %s)\n", m.Pipeline, m.JobID)
	if !m.CompletedAt.IsZero() {
		fmt.Fprintf(b, "completed: %s\n", m.CompletedAt.UTC().Format(time.RFC3339Nano))
	}
	if !m.TriggeredAt.IsZero() && !m.CompletedAt.IsZero() {
		fmt.Fprintf(b, "duration: %s\n", m.CompletedAt.Sub(m.TriggeredAt).Round(time.Microsecond))
	}
	fmt.Fprintf(b, "state size: %d B\n", m.Size())
	if t := m.Topology; t != nil {
		fmt.Fprintf(b, "topology: max parallelism %d\n", t.MaxParallelism)
		tw := tabwriter.NewWriter(b, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "  NODE\tTYPE\tPARALLELISM\tKEY")
		for _, n := range t.Nodes {
			fmt.Fprintf(tw, "  %s\t%s\t%d\t%s\n", n.ID, dash(n.Type), n.Parallelism, dash(n.Key))
		}
		tw.Flush()
	} else {
		b.WriteString("topology: not recorded\n")
	}

	b.WriteString("operators:\n")
	tw := tabwriter.NewWriter(b, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  OPERATOR\tSUBTASKS\tSTATE SIZE\tWRITTEN\tBUILDS ON\tSTAGED")
	var ops []string
	byOp := map[string][]checkpoint.SubtaskState{}
	for _, t := range m.Tasks {
		if _, ok := byOp[t.Task.Operator]; !ok {
			ops = append(ops, t.Task.Operator)
		}
		byOp[t.Task.Operator] = append(byOp[t.Task.Operator], t)
	}
	for _, op := range ops {
		var size, written int64
		staged := 0
		var on []int64 // earlier checkpoints whose state files this one reads
		for _, t := range byOp[op] {
			if t.State != nil {
				written += t.State.Size
			}
			written += t.StateWritten
			size += t.StateReused
			for _, h := range t.Shared {
				if h.Checkpoint != m.ID && !slices.Contains(on, h.Checkpoint) {
					on = append(on, h.Checkpoint)
				}
			}
			staged += len(t.Committables)
		}
		slices.Sort(on)
		buildsOn := "-"
		if len(on) > 0 {
			buildsOn = strings.Trim(fmt.Sprint(on), "[]")
		}
		fmt.Fprintf(tw, "  %s\t%d\t%d B\t%d B\t%s\t%d\n", op, len(byOp[op]), size+written, written, buildsOn, staged)
	}
	tw.Flush()

	b.WriteString("state schemas (a restore takes a state only under the same kind and codecs):\n")
	schemas := false
	for _, op := range ops {
		for _, s := range m.OperatorStates(op) {
			schemas = true
			fmt.Fprintf(b, "  %s %s\n", op, s)
		}
	}
	if !schemas {
		b.WriteString("  none recorded\n")
	}

	b.WriteString("source positions:\n")
	found := false
	for _, t := range m.Tasks {
		if len(t.Inline) == 0 {
			continue
		}
		found = true
		fmt.Fprintf(b, "  %s: %s\n", t.Task, prettyInline(t.Inline))
	}
	if !found {
		b.WriteString("  none\n")
	}

	b.WriteString("pending committables (published when this checkpoint is restored or committed):\n")
	if len(m.Commits) == 0 {
		b.WriteString("  none\n")
	}
	var sinks []string
	type pending struct {
		n   int
		ids []int64
	}
	bySink := map[string]*pending{}
	for _, c := range m.Commits {
		pd := bySink[c.Sink]
		if pd == nil {
			pd = &pending{}
			bySink[c.Sink] = pd
			sinks = append(sinks, c.Sink)
		}
		pd.n += len(c.Committables)
		if !slices.Contains(pd.ids, c.Checkpoint) {
			pd.ids = append(pd.ids, c.Checkpoint)
		}
	}
	for _, s := range sinks {
		pd := bySink[s]
		slices.Sort(pd.ids)
		ids := make([]string, len(pd.ids))
		for i, id := range pd.ids {
			ids[i] = strconv.FormatInt(id, 10)
		}
		fmt.Fprintf(b, "  %s: %d of checkpoint(s) %s\n", s, pd.n, strings.Join(ids, ", "))
	}
}

// prettyInline renders a source's inline position: indented JSON when it is
// JSON, quoted otherwise.
func prettyInline(inline []byte) string {
	var out bytes.Buffer
	if json.Valid(inline) && json.Indent(&out, inline, "  ", "  ") == nil {
		return out.String()
	}
	return strconv.Quote(string(inline))
}

// dash returns s, or "-" when it is empty.
func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// referencedBy returns, increasing, the complete checkpoints newer than id
// whose state builds on files of checkpoint id (Metadata.References). This
// is what keeps a trimmed checkpoint (no metadata, only the files newer ones
// build on) from being deleted too. A checkpoint whose metadata is corrupt
// or gone is skipped: it is no recovery point. Any other failure to read or
// decode one is an error: without it the command cannot know that deleting
// id is safe.
func referencedBy(ctx context.Context, st storage.Storage, entries []storage.Entry, id int64) ([]int64, error) {
	var by []int64
	for _, e := range entries {
		if !e.Complete || e.ID <= id {
			continue
		}
		data, err := st.ReadMetadata(ctx, e.ID)
		if storage.IsCorrupt(err) || errors.Is(err, storage.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("checking whether checkpoint %d builds on it: %w", e.ID, err)
		}
		m, err := checkpoint.DecodeMetadata(data)
		if err != nil {
			return nil, fmt.Errorf("checking whether checkpoint %d builds on it: %w", e.ID, err)
		}
		if slices.Contains(m.References(), id) {
			by = append(by, e.ID)
		}
	}
	return by, nil
}

// deleteCheckpoint deletes checkpoint id of p through its storage backend.
func deleteCheckpoint(ctx context.Context, w io.Writer, p *config.Pipeline, id int64, force bool) error {
	st, entries, err := openCheckpoints(ctx, p)
	if err != nil {
		return err
	}
	defer closeStorage(st)
	if _, ok := findEntry(entries, id); !ok {
		return noSuchCheckpoint(p, id)
	}
	if l, ok := st.(storage.Locker); ok {
		release, err := l.Lock(ctx)
		if errors.Is(err, storage.ErrLocked) {
			return &exitError{code: exitFailed, err: p.RedactError(fmt.Errorf(
				"not deleting checkpoint %d: a process running this pipeline is using %s; stop it first: %w",
				id, p.Redact(p.CheckpointDir), err))}
		}
		if err != nil {
			return &exitError{code: exitFailed, err: p.RedactError(fmt.Errorf("not deleting checkpoint %d: %w", id, err))}
		}
		defer release()
		// Listed again under the lock: a checkpoint completed meanwhile
		// may build on this one.
		if entries, err = st.List(ctx); err != nil {
			return &exitError{code: exitFailed, err: p.RedactError(fmt.Errorf("not deleting checkpoint %d: %w", id, err))}
		}
		if _, ok := findEntry(entries, id); !ok {
			return noSuchCheckpoint(p, id)
		}
	}
	if newest := newestComplete(ctx, st, entries); newest == id && !force {
		return &exitError{code: exitFailed, err: fmt.Errorf(
			"not deleting checkpoint %d: it is the newest complete checkpoint, the one the next run recovers from; "+
				"use --force to delete it anyway (the next run then recovers from an older checkpoint, or from the beginning, and is refused if a sink already published this checkpoint's output, unless --allow-duplicates)", id)}
	}
	by, err := referencedBy(ctx, st, entries, id)
	if err != nil {
		return &exitError{code: exitFailed, err: p.RedactError(fmt.Errorf("not deleting checkpoint %d: %w", id, err))}
	}
	if len(by) > 0 {
		ids := make([]string, len(by))
		for i, b := range by {
			ids[i] = strconv.FormatInt(b, 10)
		}
		return &exitError{code: exitFailed, err: fmt.Errorf(
			"not deleting checkpoint %d: complete checkpoint(s) %s build on its files (incremental snapshots) and could not be restored without them; "+
				"--force does not override this: delete those first", id, strings.Join(ids, ", "))}
	}
	if err := st.Discard(ctx, id); err != nil {
		return &exitError{code: exitFailed, err: p.RedactError(fmt.Errorf("deleting checkpoint %d: %w", id, err))}
	}
	_, err = fmt.Fprintf(w, "deleted checkpoint %d from %s\n", id, p.Redact(p.CheckpointDir))
	return err
}
