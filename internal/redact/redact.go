// Package redact hides the secrets of connection strings in everything the
// engine prints: plan descriptions, logs, errors and `ingest validate`.
//
// It knows three places a secret hides in:
//
//   - the password of a URL's user info: postgres://user:xxxxx@host/db (and
//     the user info as a whole for schemes where a lone user name is a
//     token: nats://xxxxx@host);
//   - key=value pairs of a DSN: host=h password=xxxxx;
//   - query parameters whose name says secret: ?password=, ?token=, ?sig=,
//     ?X-Amz-Signature=, ?aws_secret_access_key=, ... (see SensitiveParam).
//
// DSN redacts one connection string, Text every connection string found in
// free text, and a Scrubber also the secret values themselves, for messages
// of drivers and servers that echo a password without its key.
package redact

import (
	"net/url"
	"regexp"
	"slices"
	"strings"
	"sync"
)

// Mask replaces a hidden value.
const Mask = "xxxxx"

// unparseable replaces everything after the scheme of a URL that does not
// parse but may hold credentials.
const unparseable = "(unparseable, not shown)"

// sensitiveWords are the parts of a parameter or key name that mark its value
// as secret. They err on the side of hiding: a hidden non-secret costs a
// less precise message, a shown secret a leak.
var sensitiveWords = []string{"password", "passwd", "pwd", "secret", "token", "sig", "credential", "key", "auth", "sas"}

// lazyRegexp compiles expr on first use: compiled at program start, the
// expressions of this package held 44 KB of heap in every process, which
// each garbage collection scans, although most runs never redact a thing.
func lazyRegexp(expr string) func() *regexp.Regexp {
	return sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(expr) })
}

// SensitiveParam reports whether a URL query parameter or a DSN key named
// name holds a secret: its name contains password, passwd, pwd, secret,
// token, sig (signature, X-Amz-Signature), credential, key
// (aws_secret_access_key, sslkey), auth or sas, in any case.
func SensitiveParam(name string) bool {
	n := strings.ToLower(name)
	for _, w := range sensitiveWords {
		if strings.Contains(n, w) {
			return true
		}
	}
	return false
}

// tokenSchemes are the URL schemes whose user info without a password is a
// token (nats://TOKEN@host), hidden whole.
var tokenSchemes = []string{"nats", "tls"}

// schemeRE matches the scheme of a URL with an authority.
var schemeRE = lazyRegexp(`^([A-Za-z][A-Za-z0-9+.-]*)://`)

// listRE matches the comma that starts the next URL of a list
// (nats://a:4222,nats://b:4222).
var listRE = lazyRegexp(`,[A-Za-z][A-Za-z0-9+.-]*://`)

// dsnPairRE matches a key=value pair of a DSN, the value plain or
// single-quoted with backslash escapes. "key == value", a comparison in an
// expression, is no pair.
var dsnPairRE = lazyRegexp(`(^|[\s;?&])([A-Za-z_][A-Za-z0-9_.-]*)\s*=\s*('(?:[^'\\]|\\.)*'|[^\s'&;=][^\s'&;]*)`)

// hostUserRE matches an address with user info but no scheme,
// user:password@host:port, as a Kafka broker might be written.
var hostUserRE = lazyRegexp(`^([^\s/@:=]+):([^\s@]*)@([^\s@/]+)$`)

// DSN returns a connection string with its secrets masked: a URL (or a
// comma-separated list of URLs) keeps everything but the password of its
// user info and the values of sensitive parameters; an address
// user:password@host keeps all but the password; a key=value DSN keeps
// every pair but the sensitive ones, written key=xxxxx. A URL that does not
// parse and may hold credentials is shown by its scheme only. A string
// without secrets is returned unchanged.
func DSN(s string) string {
	if schemeRE().MatchString(s) {
		return urlList(s)
	}
	if m := hostUserRE().FindStringSubmatch(s); m != nil {
		return m[1] + ":" + Mask + "@" + m[3]
	}
	return dsnPairRE().ReplaceAllStringFunc(s, func(pair string) string {
		m := dsnPairRE().FindStringSubmatch(pair)
		if !SensitiveParam(m[2]) {
			return pair
		}
		return m[1] + m[2] + "=" + Mask
	})
}

// urlList redacts a URL or a comma-separated list of URLs.
func urlList(s string) string {
	var b strings.Builder
	for {
		loc := listRE().FindStringIndex(s)
		if loc == nil {
			b.WriteString(oneURL(s))
			return b.String()
		}
		b.WriteString(oneURL(s[:loc[0]]))
		b.WriteByte(',')
		s = s[loc[0]+1:]
	}
}

// oneURL redacts one URL, working on its raw text so that what it keeps is
// shown exactly as written.
func oneURL(s string) string {
	m := schemeRE().FindStringSubmatch(s)
	if m == nil {
		return s
	}
	scheme, rest := m[1], s[len(m[0]):]
	if _, err := url.Parse(s); err != nil {
		// url.Parse refused it, so where the user info or the query ends is
		// unknown: hide all that could hold a credential.
		if strings.ContainsAny(rest, "@?=") {
			return m[0] + unparseable
		}
		return s
	}
	end := strings.IndexAny(rest, "/?#")
	if end < 0 {
		end = len(rest)
	}
	authority, tail := rest[:end], rest[end:]
	if at := strings.LastIndexByte(authority, '@'); at >= 0 {
		user, host := authority[:at], authority[at+1:]
		if name, _, hasPassword := strings.Cut(user, ":"); hasPassword {
			user = name + ":" + Mask
		} else if slices.Contains(tokenSchemes, strings.ToLower(scheme)) && user != "" {
			user = Mask
		}
		authority = user + "@" + host
	}
	if q := strings.IndexByte(tail, '?'); q >= 0 {
		query, fragment := tail[q+1:], ""
		if h := strings.IndexByte(query, '#'); h >= 0 {
			query, fragment = query[:h], query[h:]
		}
		tail = tail[:q+1] + redactQuery(query) + fragment
	}
	return m[0] + authority + tail
}

// redactQuery masks the values of sensitive parameters of a raw query, and
// the credentials of URLs given as parameter values (an endpoint).
func redactQuery(q string) string {
	pairs := strings.Split(q, "&")
	for i, p := range pairs {
		k, v, ok := strings.Cut(p, "=")
		if !ok {
			continue
		}
		name, err := url.QueryUnescape(k)
		if err != nil {
			name = k
		}
		if SensitiveParam(name) {
			pairs[i] = k + "=" + Mask
			continue
		}
		if val, err := url.QueryUnescape(v); err == nil && schemeRE().MatchString(val) {
			if r := urlList(val); r != val {
				pairs[i] = k + "=" + url.QueryEscape(r)
			}
		}
	}
	return strings.Join(pairs, "&")
}

// textURLRE matches a URL in free text: a scheme, "://" and what follows up
// to a space, a quote or a comma (which may start the next URL of a list).
var textURLRE = lazyRegexp("[A-Za-z][A-Za-z0-9+.-]*://[^\\s\"'`<>,]+")

// textPairRE matches a key=value pair in free text whose key names a
// password, secret or token; the looser SensitiveParam applies only inside
// URLs and DSNs, where "key=" is not an ordinary word of a message.
var textPairRE = lazyRegexp(`(?i)(^|[^A-Za-z0-9_])([A-Za-z0-9_.-]*(?:password|passwd|pwd|secret|token)[A-Za-z0-9_.-]*)\s*=\s*('(?:[^'\\]|\\.)*'|[^\s'"&;,=` + "`" + `][^\s'"&;,` + "`" + `]*)`)

// textParamRE matches a query parameter in free text (after ? or &).
var textParamRE = lazyRegexp(`([?&])([^=&\s?#]+)=([^&\s#"'` + "`" + `]*)`)

// Text returns msg with the secrets of every connection string in it masked
// as DSN does: URLs anywhere in the text, query parameters, and key=value
// pairs whose key names a password, secret or token.
func Text(msg string) string {
	msg = textURLRE().ReplaceAllStringFunc(msg, func(u string) string {
		// Punctuation that ends a sentence is not part of the URL.
		trimmed := strings.TrimRight(u, ".:;)]}")
		return oneURL(trimmed) + u[len(trimmed):]
	})
	msg = textParamRE().ReplaceAllStringFunc(msg, func(p string) string {
		m := textParamRE().FindStringSubmatch(p)
		name, err := url.QueryUnescape(m[2])
		if err != nil {
			name = m[2]
		}
		if !SensitiveParam(name) || m[3] == Mask {
			return p
		}
		return m[1] + m[2] + "=" + Mask
	})
	return textPairRE().ReplaceAllStringFunc(msg, func(p string) string {
		m := textPairRE().FindStringSubmatch(p)
		if m[3] == Mask {
			return p
		}
		return m[1] + m[2] + "=" + Mask
	})
}
