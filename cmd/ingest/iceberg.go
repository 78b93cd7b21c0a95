//go:build iceberg

package main

import (
	"fmt"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/ingest-engine/ingest/connector/iceberg"
)

func init() { taggedCommands = append(taggedCommands, icebergCmd) }

// icebergCmd is `ingest iceberg`, the maintenance of Iceberg tables.
func icebergCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "iceberg", Short: "Maintain Iceberg tables the iceberg sink writes"}
	var cat iceberg.CatalogConfig
	var target, attempts int64
	compact := &cobra.Command{
		Use:   "compact --uri URI --warehouse DIR namespace.table",
		Short: "Rewrite a table's small data files into large ones, while sinks keep committing to it",
		Long: "Rewrites the table's small data files, and the rows its deletes remove from them, into files of about " +
			"--target-file-size bytes in one replace snapshot. A pipeline may keep writing the table: a rewrite never " +
			"undoes another writer's commit, and one that lost a race is planned again on the new metadata.",
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ns, tbl, err := iceberg.ParseTable(args[0])
			if err != nil {
				return &exitError{code: exitConfig, err: err}
			}
			if cat.Type != "sql" && cat.Type != "rest" || cat.URI == "" || cat.Type == "sql" && cat.Warehouse == "" {
				return &exitError{code: exitConfig, err: fmt.Errorf("need --catalog sql or rest, --uri, and for sql --warehouse (got %q, %q, %q)", cat.Type, cat.URI, cat.Warehouse)}
			}
			if cat.Warehouse != "" && !strings.Contains(cat.Warehouse, "://") {
				if cat.Warehouse, err = filepath.Abs(cat.Warehouse); err != nil {
					return err
				}
			}
			res, err := iceberg.Compact(cmd.Context(), iceberg.SinkConfig{Catalog: cat, Namespace: ns, Table: tbl}, target, int(attempts))
			if err != nil {
				return err
			}
			if res.Groups == 0 {
				_, err = fmt.Fprintf(cmd.OutOrStdout(), "%s: nothing to compact\n", args[0])
				return err
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "%s: %d groups rewritten, %d data files replaced by %d (attempts: %d)\n",
				args[0], res.Groups, res.Removed, res.Added, res.Attempts)
			return err
		},
	}
	compact.Flags().StringVar(&cat.Type, "catalog", "sql", "catalog type: sql (PostgreSQL) or rest")
	compact.Flags().StringVar(&cat.URI, "uri", "", "the SQL catalog's connection string, or the REST catalog's URL")
	compact.Flags().StringVar(&cat.Warehouse, "warehouse", "", "the warehouse directory (sql catalogs)")
	compact.Flags().StringVar(&cat.Name, "catalog-name", "ingest", "the catalog's name")
	compact.Flags().Int64Var(&target, "target-file-size", 512<<20, "the size of the files written, in bytes")
	compact.Flags().Int64Var(&attempts, "attempts", 10, "how many times a rewrite that lost a race with another writer is planned again")
	cmd.AddCommand(compact)
	return cmd
}
