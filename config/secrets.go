package config

import (
	"errors"
	"regexp"

	"go.yaml.in/yaml/v3"

	"github.com/ingest-engine/ingest/internal/redact"
)

// This file keeps the secrets of the pipeline file out of everything printed
// about it: configuration errors, the plan, logs and run errors.

// secretField matches the names of fields whose value is a secret as a
// whole (http.token, a password field).
var secretField = regexp.MustCompile(`(?i)password|passwd|secret|token`)

// fileSecrets returns a scrubber for every secret in the YAML document: each
// scalar that holds a connection string with a password, token or signed
// parameter (a DSN, a NATS URL, a checkpoint URL with credentials, ...),
// whichever field it is in, so a connector added later is covered too; and
// the value of every field whose name says it is a secret.
func fileSecrets(doc *yaml.Node) redact.Scrubber {
	var dsns, values []string
	var walk func(n *yaml.Node)
	walk = func(n *yaml.Node) {
		if n.Kind == yaml.ScalarNode && redact.DSN(n.Value) != n.Value {
			dsns = append(dsns, n.Value)
		}
		if n.Kind == yaml.MappingNode {
			for i := 0; i+1 < len(n.Content); i += 2 {
				if k, v := n.Content[i], n.Content[i+1]; v.Kind == yaml.ScalarNode && secretField.MatchString(k.Value) {
					values = append(values, v.Value)
				}
			}
		}
		for _, c := range n.Content {
			walk(c)
		}
	}
	walk(doc)
	return redact.NewScrubber(dsns...).With(values...)
}

// scrubErrors removes secrets from the messages of configuration errors,
// keeping their types (*Error stays *Error).
func scrubErrors(s redact.Scrubber, list []error) []error {
	out := make([]error, len(list))
	for i, err := range list {
		var ce *Error
		if errors.As(err, &ce) && error(ce) == err {
			c := *ce
			c.Msg = s.String(c.Msg)
			out[i] = &c
			continue
		}
		out[i] = s.Error(err)
	}
	return out
}

// Redact returns s, a message about the pipeline, with the secrets of the
// pipeline file's connection strings and of every connection string in s
// masked: for plans, logs and errors.
func (p *Pipeline) Redact(s string) string { return p.secrets.String(s) }

// RedactError returns err, or an error with the same chain whose message has
// the secrets Redact masks masked.
func (p *Pipeline) RedactError(err error) error { return p.secrets.Error(err) }
