package blob

import (
	"fmt"
	"net/url"
	"regexp"
	"strings"
	"time"

	"github.com/ingest-engine/ingest/internal/redact"
)

// location is a parsed checkpoint URL: where the bucket is, the key prefix inside it, the
// parameters meant for this package, and what must never appear in a message.
type location struct {
	// scheme is the URL scheme: s3, gs, azblob, file, mem, or, with -tags gocloud, another registered with gocloud.dev.
	scheme string
	// bucket is the URL host: the bucket or container (for mem, the name of a process-wide bucket).
	// For file it is empty and dir is set instead.
	bucket string
	// dir is the local directory of a file URL.
	dir string
	// prefix is the key prefix of every object: "" or a string ending in "/".
	prefix string
	// user holds credentials given in the URL (s3 only), or nil.
	user *url.Userinfo
	// query holds the parameters left for the driver after this package's were removed.
	query url.Values
	// lease and timeout are the lease and timeout parameters; zero when absent.
	lease, timeout time.Duration
	// base is the redacted location for messages: scheme://bucket/prefix, with no credentials and
	// no query.
	base string
	// secrets are the strings of the URL that must not appear in a message: the password and user
	// name of the userinfo, and the values of parameters whose name suggests a secret.
	secrets []string
}

// Parameters this package takes out of the URL before the rest goes to the driver
// (which rejects parameters it does not know).
const (
	paramLease   = "lease"
	paramTimeout = "timeout"
	paramPrefix  = "prefix"
	// paramInstanceMetadata (s3 only) lets the S3 client ask the EC2 instance-metadata service for
	// credentials when nothing else provides them. It is taken by openS3, not by parseLocation.
	paramInstanceMetadata = "instance_metadata"
)

// schemeRE matches a URL scheme followed by "://": what tells a URL from a local path.
var schemeRE = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9+.-]*://`)

// IsURL reports whether dirOrURL is a URL ("scheme://...") rather than a local directory path.
// Windows drive paths (C:\dir) and relative paths are not URLs.
func IsURL(dirOrURL string) bool { return schemeRE.MatchString(dirOrURL) }

// parseLocation parses a checkpoint URL. Its errors never contain credentials.
func parseLocation(raw string) (*location, error) {
	if !IsURL(raw) {
		return nil, fmt.Errorf("storage/blob: %q is not a URL (scheme://bucket/prefix)", redactRaw(raw))
	}
	u, err := url.Parse(raw)
	if err != nil {
		// url.Parse quotes the whole input, credentials included: report only the redacted form.
		return nil, fmt.Errorf("storage/blob: invalid checkpoint URL %s", redactRaw(raw))
	}
	loc := &location{scheme: strings.ToLower(u.Scheme), user: u.User}
	if u.User != nil {
		if p, ok := u.User.Password(); ok && p != "" {
			loc.secrets = append(loc.secrets, p)
		}
		if n := u.User.Username(); n != "" {
			loc.secrets = append(loc.secrets, n)
		}
	}
	q := u.Query()
	for name, values := range q {
		for _, v := range values {
			if sensitiveParam(name) && v != "" {
				loc.secrets = append(loc.secrets, v)
			}
			// An endpoint may carry its own credentials (http://user:pass@host).
			if pu, err := url.Parse(v); err == nil && pu.User != nil {
				if p, ok := pu.User.Password(); ok && p != "" {
					loc.secrets = append(loc.secrets, p)
				}
			}
		}
	}
	// From here on, messages may show the redacted form.
	shown := redactURL(u)
	fail := func(format string, args ...any) error {
		return fmt.Errorf("storage/blob: checkpoint URL %s: %s", shown, fmt.Sprintf(format, args...))
	}
	if u.Opaque != "" {
		return nil, fail(`expected scheme://bucket/prefix`)
	}
	for _, p := range []struct {
		name string
		dst  *time.Duration
	}{{paramLease, &loc.lease}, {paramTimeout, &loc.timeout}} {
		if v := q.Get(p.name); v != "" {
			d, err := time.ParseDuration(v)
			if err != nil || d <= 0 {
				return nil, fail("parameter %s=%q: want a positive duration such as 30s", p.name, v)
			}
			*p.dst = d
		}
		q.Del(p.name)
	}
	prefix := strings.Trim(u.Path, "/")
	if pp := q.Get(paramPrefix); pp != "" {
		if loc.scheme == "file" {
			return nil, fail("parameter prefix is not supported for file URLs: put the directory in the path")
		}
		if prefix != "" {
			return nil, fail("the prefix is given twice, as the path %q and as parameter prefix=%q", prefix, pp)
		}
		prefix = strings.Trim(pp, "/")
	}
	q.Del(paramPrefix)
	if strings.Contains(prefix, "//") || strings.Contains("/"+prefix+"/", "/../") || strings.Contains("/"+prefix+"/", "/./") {
		return nil, fail(`the prefix %q has an empty, "." or ".." segment`, prefix)
	}
	loc.query = q

	switch loc.scheme {
	case "file":
		if u.Host != "" && u.Host != "localhost" {
			return nil, fail(`a file URL names a local directory: file:///absolute/path (host %q is not allowed)`, u.Host)
		}
		if u.User != nil {
			return nil, fail("credentials are not allowed in a file URL")
		}
		if prefix == "" {
			return nil, fail("no directory: file:///absolute/path")
		}
		loc.dir = "/" + prefix
		loc.base = "file://" + loc.dir
	default:
		if u.Host == "" && loc.scheme != "mem" {
			return nil, fail("no bucket: %s://bucket/prefix", loc.scheme)
		}
		if u.User != nil && loc.scheme != "s3" {
			return nil, fail("credentials in the URL are supported for s3 only; use the driver's usual configuration (environment, profile)")
		}
		loc.bucket = u.Host
		if prefix != "" {
			loc.prefix = prefix + "/"
		}
		loc.base = loc.scheme + "://" + loc.bucket
		if prefix != "" {
			loc.base += "/" + prefix
		}
	}
	return loc, nil
}

// sensitiveParam reports whether a query parameter's name suggests its value is a secret: the
// engine-wide rule of internal/redact, which errs on the side of hiding (a hidden non-secret costs
// a less precise message, a shown secret a leak).
func sensitiveParam(name string) bool { return redact.SensitiveParam(name) }

// redacted replaces a hidden value in messages.
const redacted = "REDACTED"

// redactURL returns u for messages: credentials replaced, sensitive parameter values replaced.
func redactURL(u *url.URL) string {
	c := *u
	if c.User != nil {
		c.User = url.User(redacted)
	}
	q := c.Query()
	for name, values := range q {
		for i, v := range values {
			switch {
			case sensitiveParam(name):
				values[i] = redacted
			default:
				if pu, err := url.Parse(v); err == nil && pu.User != nil {
					pu.User = url.User(redacted)
					values[i] = pu.String()
				}
			}
		}
	}
	c.RawQuery = q.Encode()
	return c.String()
}

// userinfoRE matches the userinfo of a URL that url.Parse could not parse.
var userinfoRE = regexp.MustCompile(`://[^/?#]*@`)

// redactRaw is a best-effort redaction of a string that may not parse as a URL: it removes any
// userinfo and everything after '?'.
func redactRaw(raw string) string {
	s := userinfoRE.ReplaceAllString(raw, "://"+redacted+"@")
	if i := strings.IndexByte(s, '?'); i >= 0 {
		s = s[:i] + "?" + redacted
	}
	return s
}

// scrub returns err unchanged unless its message contains one of secrets; then it returns an error
// with the secrets replaced in the message that still unwraps to err, so errors.Is and errors.As
// keep working.
func scrub(err error, secrets []string) error {
	if err == nil || len(secrets) == 0 {
		return err
	}
	msg := err.Error()
	clean := msg
	for _, s := range secrets {
		clean = strings.ReplaceAll(clean, s, redacted)
		// Drivers may print the URL-escaped form.
		if e := url.QueryEscape(s); e != s {
			clean = strings.ReplaceAll(clean, e, redacted)
		}
	}
	if clean == msg {
		return err
	}
	return &scrubbedError{msg: clean, err: err}
}

// scrubbedError is an error whose message had secrets removed.
type scrubbedError struct {
	msg string
	err error
}

func (e *scrubbedError) Error() string { return e.msg }
func (e *scrubbedError) Unwrap() error { return e.err }
