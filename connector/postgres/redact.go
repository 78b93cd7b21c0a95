package postgres

import "github.com/ingest-engine/ingest/internal/redact"

// RedactDSN returns dsn with its password replaced by xxxxx, for logs and
// plan descriptions (see internal/redact: a URL's password and sensitive
// parameters, a key=value DSN's password). A URL that does not parse is
// shown by its scheme only.
func RedactDSN(dsn string) string { return redact.DSN(dsn) }

// redactor removes a password from error messages. The pgx errors the sink
// wraps do not print passwords, but a server message, a parse error of a
// malformed DSN or a future library version might; every error the sink
// returns passes through here.
type redactor struct{ s redact.Scrubber }

// newRedactor redacts the passwords of dsn: parsed is the one the driver
// found (empty when the DSN did not parse; it may come from the environment
// or a password file), and what the DSN itself holds is added, so even a DSN
// the driver refused is covered.
func newRedactor(dsn, parsed string) redactor {
	return redactor{s: redact.NewScrubber(dsn).With(parsed)}
}

// wrap returns err, or an error with the same chain whose message has every
// secret replaced.
func (r redactor) wrap(err error) error { return r.s.Error(err) }
