package config

import (
	"fmt"
	"strings"

	"github.com/ingest-engine/ingest/connector"
)

// ConnectorReference renders the registered connector specs as Markdown:
// the connector reference of docs/yaml.md (TestConnectorReferenceIsCurrent)
// and of `ingest connectors`.
func ConnectorReference() string {
	var b strings.Builder
	b.WriteString("Every source takes `type` and `parallelism` (default: the pipeline's `parallelism`, capped by a\n" +
		"connector that can run fewer subtasks); every sink also takes `input`, the node whose records it writes.\n" +
		"Fields named `a.b` are field `b` of the mapping `a`.\n")
	for _, role := range []connector.Role{connector.RoleSource, connector.RoleSink} {
		title := map[connector.Role]string{connector.RoleSource: "Sources", connector.RoleSink: "Sinks"}[role]
		fmt.Fprintf(&b, "\n### %s\n", title)
		for _, s := range connector.Specs(role) {
			writeSpec(&b, s)
		}
	}
	return b.String()
}

// writeSpec renders one connector type: summary, field table, example.
func writeSpec(b *strings.Builder, s connector.Spec) {
	fmt.Fprintf(b, "\n#### `%s` %s\n\n%s\n", s.Type, s.Role, s.Summary)
	if len(s.Fields) > 0 {
		b.WriteString("\n| Field | Type | Default | Description |\n|---|---|---|---|\n")
		writeFields(b, "", s.Fields)
	}
	if s.Example != "" {
		section := map[connector.Role]string{connector.RoleSource: "sources", connector.RoleSink: "sinks"}[s.Role]
		fmt.Fprintf(b, "\n```yaml\n%s:\n  %s:\n    %s\n```\n", section, s.Type+"_example",
			strings.ReplaceAll(strings.TrimSpace(s.Example), "\n", "\n    "))
	}
}

// writeFields renders fields as table rows, a mapping's own fields after it
// with their dotted names.
func writeFields(b *strings.Builder, prefix string, fields []connector.Field) {
	for _, f := range fields {
		def := "—"
		switch {
		case f.Required:
			def = "required"
		case f.Default != "":
			def = "`" + f.Default + "`"
		}
		doc := f.Doc
		if len(f.Values) > 0 {
			doc += " One of `" + strings.Join(f.Values, "`, `") + "`."
		}
		fmt.Fprintf(b, "| `%s%s` | %s | %s | %s |\n", prefix, f.Name, f.Kind, def, strings.ReplaceAll(doc, "|", `\|`))
		writeFields(b, prefix+f.Name+".", f.Fields)
	}
}
