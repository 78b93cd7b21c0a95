package redact

import (
	"net/url"
	"slices"
	"strings"
)

// minSecret is the shortest secret value a Scrubber replaces in free text:
// replacing one or two characters everywhere would mangle every message.
// Shorter passwords are still masked where they appear as part of a
// connection string.
const minSecret = 3

// Secrets returns the secret values of a connection string (a URL, a
// comma-separated list of URLs or a key=value DSN), each as written and
// unescaped, and the escaped forms a driver's message may show: what must
// not appear in any message about it.
func Secrets(s string) []string {
	var out []string
	add := func(v string) {
		if v == "" {
			return
		}
		for _, f := range []string{v, url.QueryEscape(v), url.PathEscape(v)} {
			if !slices.Contains(out, f) {
				out = append(out, f)
			}
		}
	}
	addRaw := func(raw string, unescape func(string) (string, error)) {
		add(raw)
		if v, err := unescape(raw); err == nil {
			add(v)
		}
	}
	if !schemeRE().MatchString(s) {
		if m := hostUserRE().FindStringSubmatch(s); m != nil {
			addRaw(m[2], url.PathUnescape)
			return out
		}
		for _, m := range dsnPairRE().FindAllStringSubmatch(s, -1) {
			if !SensitiveParam(m[2]) {
				continue
			}
			v := m[3]
			if strings.HasPrefix(v, "'") && strings.HasSuffix(v, "'") && len(v) >= 2 {
				v = strings.NewReplacer(`\'`, `'`, `\\`, `\`).Replace(v[1 : len(v)-1])
			}
			add(v)
		}
		return out
	}
	parts := []string{s}
	for loc := listRE().FindStringIndex(s); loc != nil; loc = listRE().FindStringIndex(s) {
		parts[len(parts)-1] = s[:loc[0]]
		s = s[loc[0]+1:]
		parts = append(parts, s)
	}
	for _, u := range parts {
		m := schemeRE().FindStringSubmatch(u)
		rest := u[len(m[0]):]
		end := strings.IndexAny(rest, "/?#")
		if end < 0 {
			end = len(rest)
		}
		if at := strings.LastIndexByte(rest[:end], '@'); at >= 0 {
			name, password, hasPassword := strings.Cut(rest[:at], ":")
			switch {
			case hasPassword:
				addRaw(password, url.PathUnescape)
			case slices.Contains(tokenSchemes, strings.ToLower(m[1])):
				addRaw(name, url.PathUnescape)
			}
		}
		q := strings.IndexByte(rest, '?')
		if q < 0 {
			continue
		}
		query, _, _ := strings.Cut(rest[q+1:], "#")
		for _, p := range strings.Split(query, "&") {
			k, v, _ := strings.Cut(p, "=")
			name, err := url.QueryUnescape(k)
			if err != nil {
				name = k
			}
			if SensitiveParam(name) {
				addRaw(v, url.QueryUnescape)
			} else if val, err := url.QueryUnescape(v); err == nil && schemeRE().MatchString(val) {
				for _, nested := range Secrets(val) {
					add(nested)
				}
			}
		}
	}
	return out
}

// Scrubber removes secrets from messages: the known secret values of some
// connection strings, wherever they appear, and the secrets of every
// connection string in the message (see Text). Its zero value applies Text
// only.
type Scrubber struct {
	// secrets are the values to replace, longest first so that a secret
	// containing another is replaced whole.
	secrets []string
}

// NewScrubber returns a scrubber for the secrets of the connection strings
// dsns (see Secrets).
func NewScrubber(dsns ...string) Scrubber {
	var s Scrubber
	for _, d := range dsns {
		s = s.With(Secrets(d)...)
	}
	return s
}

// With returns a scrubber that also replaces the values secrets, such as a
// password a driver found in a DSN or its environment.
func (s Scrubber) With(secrets ...string) Scrubber {
	out := Scrubber{secrets: slices.Clone(s.secrets)}
	for _, v := range secrets {
		if len(v) >= minSecret && !slices.Contains(out.secrets, v) {
			out.secrets = append(out.secrets, v)
		}
	}
	slices.SortStableFunc(out.secrets, func(a, b string) int { return len(b) - len(a) })
	return out
}

// String returns msg with every known secret and the secrets of every
// connection string in it replaced by Mask.
func (s Scrubber) String(msg string) string {
	for _, v := range s.secrets {
		msg = strings.ReplaceAll(msg, v, Mask)
	}
	return Text(msg)
}

// Error returns err when its message holds no secret, else an error whose
// message is scrubbed and that unwraps to err, so errors.Is and errors.As
// still see the cause.
func (s Scrubber) Error(err error) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	clean := s.String(msg)
	if clean == msg {
		return err
	}
	return &scrubbed{msg: clean, err: err}
}

// scrubbed is an error whose message had secrets removed.
type scrubbed struct {
	msg string
	err error
}

func (e *scrubbed) Error() string { return e.msg }
func (e *scrubbed) Unwrap() error { return e.err }
