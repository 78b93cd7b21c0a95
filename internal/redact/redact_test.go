package redact_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/ingest-engine/ingest/internal/redact"
)

// secret is in every password and secret parameter of the cases below, so
// a test can check that none of it is left.
const secret = "s3cr3t"

func TestDSN(t *testing.T) {
	for in, want := range map[string]string{
		// URLs: the user info's password, sensitive parameters.
		"postgres://user:s3cr3t@host:5432/db?sslmode=disable":                         "postgres://user:xxxxx@host:5432/db?sslmode=disable",
		"postgresql://user@host/db?password=s3cr3t":                                   "postgresql://user@host/db?password=xxxxx",
		"postgres://us%20er:p%40ss%2Fs3cr3t@host/db":                                  "postgres://us%20er:xxxxx@host/db",
		"postgresql://user:s3cr3t@host1:5432,host2:5433/db?x=1":                       "postgresql://user:xxxxx@host1:5432,host2:5433/db?x=1",
		"postgres://user:s3cr3t@host:notaport%zz/db":                                  "postgres://(unparseable, not shown)",
		"nats://u:s3cr3t@127.0.0.1:4222":                                              "nats://u:xxxxx@127.0.0.1:4222",
		"nats://s3cr3t@127.0.0.1:4222":                                                "nats://xxxxx@127.0.0.1:4222",
		"nats://u:s3cr3t@a:4222,nats://v:s3cr3t@b:4222":                               "nats://u:xxxxx@a:4222,nats://v:xxxxx@b:4222",
		"s3://AKID:s3cr3t@bucket/prefix?region=eu-west-1":                             "s3://AKID:xxxxx@bucket/prefix?region=eu-west-1",
		"https://acct.blob.core.windows.net/c?sv=2024&sig=s3cr3t&se=x":                "https://acct.blob.core.windows.net/c?sv=2024&sig=xxxxx&se=x",
		"https://b.s3.amazonaws.com/k?X-Amz-Signature=s3cr3t&X-Amz-Date=1":            "https://b.s3.amazonaws.com/k?X-Amz-Signature=xxxxx&X-Amz-Date=1",
		"s3://b/p?aws_secret_access_key=s3cr3t&token=s3cr3t#frag":                     "s3://b/p?aws_secret_access_key=xxxxx&token=xxxxx#frag",
		"s3://b/p?endpoint=" + "http%3A%2F%2Fu%3As3cr3t%40minio%3A9000" + "&region=x": "s3://b/p?endpoint=" + "http%3A%2F%2Fu%3Axxxxx%40minio%3A9000" + "&region=x",
		"host=h user=u password=s3cr3t dbname=d":                                      "host=h user=u password=xxxxx dbname=d",
		"u:s3cr3t@broker:9092":                                                        "u:xxxxx@broker:9092",
		"broker:9092":                                                                 "broker:9092",
		"host=h password = 'with space s3cr3t' dbname=d":                              "host=h password=xxxxx dbname=d",
		"host=h sslpassword='it\\'s s3cr3t' sslmode=require":                          "host=h sslpassword=xxxxx sslmode=require",
		// Nothing to hide: unchanged, byte for byte.
		"postgres://user@host/db":      "postgres://user@host/db",
		"host=h user=u dbname=d":       "host=h user=u dbname=d",
		"file:///var/lib/ingest/ck":    "file:///var/lib/ingest/ck",
		"nats://127.0.0.1:4222":        "nats://127.0.0.1:4222",
		"s3://b/p?region=x&lease=30s":  "s3://b/p?region=x&lease=30s",
		"postgres://host/db?b=2&a=%20": "postgres://host/db?b=2&a=%20",
		"token == 'abc'":               "token == 'abc'",
	} {
		got := redact.DSN(in)
		if got != want {
			t.Errorf("DSN(%q) = %q, want %q", in, got, want)
		}
		if strings.Contains(got, secret) {
			t.Errorf("DSN(%q) = %q shows the secret", in, got)
		}
	}
}

// Text finds connection strings inside messages: quoted, followed by
// punctuation, in lists, and key=value pairs of a DSN.
func TestText(t *testing.T) {
	for in, want := range map[string]string{
		"connecting to nats://u:s3cr3t@127.0.0.1:1: connection refused": "connecting to nats://u:xxxxx@127.0.0.1:1: connection refused",
		`parse "postgres://u:s3cr3t@h:x%zz/db": invalid URL escape`:     `parse "postgres://(unparseable, not shown)": invalid URL escape`,
		"servers nats://u:s3cr3t@a:1,nats://b:2.":                       "servers nats://u:xxxxx@a:1,nats://b:2.",
		"dsn `host=h password=s3cr3t user=u` refused":                   "dsn `host=h password=xxxxx user=u` refused",
		"GET https://h/k?X-Amz-Signature=s3cr3t&a=1 (403)":              "GET https://h/k?X-Amz-Signature=xxxxx&a=1 (403)",
		"url postgresql://u:s3cr3t@h1:1,h2:2/db?password=s3cr3t":        "url postgresql://u:xxxxx@h1:1,h2:2/db?password=xxxxx",
		"CLIENT_SECRET=s3cr3t and token: none":                          "CLIENT_SECRET=xxxxx and token: none",
		// Ordinary messages are left alone: "key=" is no secret outside a
		// connection string, nor is a word.
		"window for key=42 closed; password authentication failed for user u": "window for key=42 closed; password authentication failed for user u",
		"filter token == 'a' and password != 'b'":                             "filter token == 'a' and password != 'b'",
		"checkpoint 3 in file:///tmp/ck: done":                                "checkpoint 3 in file:///tmp/ck: done",
	} {
		if got := redact.Text(in); got != want {
			t.Errorf("Text(%q) =\n %q, want\n %q", in, got, want)
		}
	}
}

// Every name the issue lists is sensitive; ordinary parameters are not.
func TestSensitiveParam(t *testing.T) {
	for _, n := range []string{"password", "PASSWORD", "sslpassword", "secret", "token", "sas", "sig", "X-Amz-Signature",
		"X-Amz-Credential", "X-Amz-Security-Token", "aws_secret_access_key", "api_key", "auth_token", "pwd"} {
		if !redact.SensitiveParam(n) {
			t.Errorf("SensitiveParam(%q) = false", n)
		}
	}
	for _, n := range []string{"sslmode", "region", "endpoint", "lease", "dbname", "x"} {
		if redact.SensitiveParam(n) {
			t.Errorf("SensitiveParam(%q) = true", n)
		}
	}
}

// A scrubber replaces the secret values themselves, in any escaping, in
// messages that show them without their key (a server echoing a password),
// and keeps the error chain.
func TestScrubberError(t *testing.T) {
	cause := errors.New("cause")
	for _, dsn := range []string{
		"postgres://u:p%40ss-s3cr3t@h/db",
		"host=h password='p@ss-s3cr3t' user=u",
		"host=h password=p@ss-s3cr3t user=u",
		"nats://p@ss-s3cr3t@h:4222",
		"s3://b/p?sig=p%40ss-s3cr3t",
		"host=h port=x password=p@ss-s3cr3t", // a DSN a driver would refuse
	} {
		s := redact.NewScrubber(dsn)
		for _, msg := range []string{"server said p@ss-s3cr3t", "escaped p%40ss-s3cr3t", "dsn " + dsn} {
			err := s.Error(fmt.Errorf("%s: %w", msg, cause))
			if strings.Contains(err.Error(), secret) {
				t.Errorf("%q: %q shows the secret", dsn, err)
			}
			if !errors.Is(err, cause) {
				t.Errorf("%q: the scrubbed error lost its cause", dsn)
			}
		}
		clean := errors.New("nothing to hide in nats://h:4222")
		if s.Error(clean) != clean {
			t.Errorf("%q: an error without secrets was replaced", dsn)
		}
	}
	// A password a driver found elsewhere (its environment) is added by value.
	s := redact.Scrubber{}.With("from-env-s3cr3t", "ab")
	if got := s.String("auth from-env-s3cr3t failed (ab)"); got != "auth xxxxx failed (ab)" {
		t.Errorf("With: %q", got)
	}
	if s.Error(nil) != nil {
		t.Error("Error(nil) is not nil")
	}
}

// Secrets lists the values of every kind of connection string.
func TestSecrets(t *testing.T) {
	for dsn, want := range map[string]string{
		"postgres://u:s3cr3t@h/db":                      "s3cr3t",
		"u:s3cr3t@broker:9092":                          "s3cr3t",
		"postgres://u@h/db?password=s3cr3t%21":          "s3cr3t!",
		"nats://s3cr3t-token@h:4222":                    "s3cr3t-token",
		"host=h password='it\\'s s3cr3t'":               "it's s3cr3t",
		"s3://b/p?endpoint=http%3A%2F%2Fu%3As3cr3t%40m": "s3cr3t",
	} {
		got := redact.Secrets(dsn)
		found := false
		for _, s := range got {
			found = found || s == want
		}
		if !found {
			t.Errorf("Secrets(%q) = %q, want it to hold %q", dsn, got, want)
		}
	}
	for _, dsn := range []string{"postgres://user@host/db", "host=h user=u", "nats://127.0.0.1:4222"} {
		if got := redact.Secrets(dsn); len(got) != 0 {
			t.Errorf("Secrets(%q) = %q, want none", dsn, got)
		}
	}
}
