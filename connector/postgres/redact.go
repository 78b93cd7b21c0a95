package postgres

import (
	"net/url"
	"regexp"
	"slices"
	"strings"
)

// redactedPassword replaces passwords in everything the sink prints.
const redactedPassword = "xxxxx"

var (
	quotedPasswordKV = regexp.MustCompile(`password\s*=\s*'(?:[^'\\]|\\.)*'`)
	plainPasswordKV  = regexp.MustCompile(`password\s*=\s*[^\s']*`)
	passwordValue    = regexp.MustCompile(`password\s*=\s*('(?:[^'\\]|\\.)*'|[^\s'&]+)`)
)

// RedactDSN returns dsn with its password replaced by xxxxx, for logs and
// plan descriptions. A URL that does not parse is shown by its scheme only.
func RedactDSN(dsn string) string {
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		u, err := url.Parse(dsn)
		if err != nil {
			scheme, _, _ := strings.Cut(dsn, "://")
			return scheme + "://(unparseable, not shown)"
		}
		q := u.Query()
		if q.Has("password") {
			q.Set("password", redactedPassword)
			u.RawQuery = q.Encode()
		}
		return u.Redacted()
	}
	dsn = quotedPasswordKV.ReplaceAllLiteralString(dsn, "password="+redactedPassword)
	return plainPasswordKV.ReplaceAllLiteralString(dsn, "password="+redactedPassword)
}

// redactor removes a password from error messages. The pgx errors the sink
// wraps do not print passwords, but a server message, a parse error of a
// malformed DSN or a future library version might; every error the sink
// returns passes through here.
type redactor struct{ secrets []string }

// newRedactor redacts the passwords of dsn: parsed is the one the driver
// found (empty when the DSN did not parse), and what a URL's user info or a
// password= pair holds is added, so even a DSN the driver refused is covered.
// The raw DSN is redacted as a whole too.
func newRedactor(dsn, parsed string) redactor {
	var r redactor
	add := func(p string) {
		if p == "" {
			return
		}
		for _, s := range []string{p, url.QueryEscape(p), url.PathEscape(p)} {
			if !slices.Contains(r.secrets, s) {
				r.secrets = append(r.secrets, s)
			}
		}
	}
	add(parsed)
	if u, err := url.Parse(dsn); err == nil && u.User != nil {
		p, _ := u.User.Password()
		add(p)
		add(u.Query().Get("password"))
	}
	for _, m := range passwordValue.FindAllStringSubmatch(dsn, -1) {
		add(strings.Trim(m[1], "'"))
	}
	if dsn != "" && RedactDSN(dsn) != dsn {
		r.secrets = append(r.secrets, dsn)
	}
	// Longest first, so a secret containing another is replaced whole.
	slices.SortFunc(r.secrets, func(a, b string) int { return len(b) - len(a) })
	return r
}

// wrap returns err, or an error with the same chain whose message has every
// secret replaced.
func (r redactor) wrap(err error) error {
	if err == nil || len(r.secrets) == 0 {
		return err
	}
	msg := err.Error()
	clean := msg
	for _, s := range r.secrets {
		if len(s) >= 3 { // replacing one or two characters would mangle every message
			clean = strings.ReplaceAll(clean, s, redactedPassword)
		}
	}
	if clean == msg {
		return err
	}
	return &redactedError{msg: clean, err: err}
}

// redactedError is an error whose message had a secret removed. errors.Is and
// errors.As still see the cause; its message is not repeated.
type redactedError struct {
	msg string
	err error
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.err }
