//go:build iceberg

package iceberg

import (
	"context"
	"fmt"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"
	"github.com/apache/iceberg-go/table/compaction"
)

// CompactResult is what one Compact did.
type CompactResult struct {
	// Groups is how many groups of small files were rewritten, and Removed
	// and Added the data files replaced and written.
	Groups, Removed, Added int
	// Attempts is how many times the rewrite was planned: a commit that
	// lost a race with another writer is planned again on the new metadata.
	Attempts int
}

// Compact rewrites the table's small data files (and the rows deletes
// remove from them) into files of about targetSize bytes, in one `replace`
// snapshot per attempt. It never undoes another writer's commit: the
// catalog takes the rewrite only on the metadata it was planned on, and a
// rewrite that an equality delete committed meanwhile would resurrect rows
// is refused by iceberg-go's validation; either way it plans again from the
// new metadata, up to attempts times.
func Compact(ctx context.Context, cfg SinkConfig, targetSize int64, attempts int) (CompactResult, error) {
	s := &Sink{cfg: cfg, name: "compact"}
	var res CompactResult
	for res.Attempts < attempts {
		res.Attempts++
		tbl, err := s.loadTable(ctx, false)
		if err != nil {
			return res, err
		}
		ccfg := compaction.DefaultConfig()
		if targetSize > 0 {
			ccfg.TargetFileSizeBytes = targetSize
			ccfg.MinFileSizeBytes = targetSize * 3 / 4
			ccfg.MaxFileSizeBytes = targetSize * 9 / 5
		}
		plan, err := compaction.Analyze(ctx, tbl, ccfg)
		if err != nil {
			return res, fmt.Errorf("planning the compaction of %s.%s: %w", cfg.Namespace, cfg.Table, err)
		}
		if len(plan.Groups) == 0 {
			return res, nil
		}
		groups := make([]table.CompactionTaskGroup, len(plan.Groups))
		for i, g := range plan.Groups {
			groups[i] = table.CompactionTaskGroup{PartitionKey: g.PartitionKey, Tasks: g.Tasks, TotalSizeBytes: g.TotalSizeBytes}
		}
		out, err := tbl.RewriteDataFiles(ctx, groups, table.RewriteDataFilesOptions{
			SnapshotProps: iceberg.Properties{"ingest.compaction": "true"},
			GroupOptions:  []table.CompactionGroupOption{table.WithCompactionTargetFileSize(ccfg.TargetFileSizeBytes)},
		})
		if err != nil && lostRace(err) {
			continue
		}
		if err != nil {
			return res, fmt.Errorf("rewriting %d groups of %s.%s: %w", len(groups), cfg.Namespace, cfg.Table, err)
		}
		res.Groups, res.Removed, res.Added = out.RewrittenGroups, out.RemovedDataFiles, out.AddedDataFiles
		return res, nil
	}
	return res, fmt.Errorf("compacting %s.%s: another writer committed before each of %d attempts: %w", cfg.Namespace, cfg.Table, attempts, table.ErrCommitFailed)
}
