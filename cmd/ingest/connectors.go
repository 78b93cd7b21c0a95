package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/ingest-engine/ingest/config"
)

// connectorsCmd prints the connector reference: every source and sink type
// with its fields, defaults and an example, from the connectors' registered
// specs (the same text as docs/yaml.md's connector reference).
func connectorsCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "connectors",
		Short: "Print every source and sink type with its fields, defaults and an example (Markdown)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, err := fmt.Fprint(cmd.OutOrStdout(), config.ConnectorReference())
			return err
		},
	}
}
