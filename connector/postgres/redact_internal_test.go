package postgres

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// An error whose message holds the password (a server or driver message
// that echoes the DSN) is redacted, and errors.Is still sees its cause.
func TestRedactorWrap(t *testing.T) {
	cause := errors.New("cause")
	for _, dsn := range []string{
		"postgres://u:p%40ss-Secret@h/db",
		"host=h password='p@ss-Secret' user=u",
		"host=h password=p@ss-Secret user=u",
	} {
		r := newRedactor(dsn, "p@ss-Secret")
		for _, msg := range []string{"server said p@ss-Secret", "url p%40ss-Secret", "dsn " + dsn} {
			err := r.wrap(fmt.Errorf("%s: %w", msg, cause))
			if strings.Contains(err.Error(), "Secret") {
				t.Errorf("%q: wrapped error %q shows the password", dsn, err)
			}
			if !errors.Is(err, cause) {
				t.Errorf("%q: the redacted error lost its cause", dsn)
			}
		}
		clean := errors.New("nothing secret")
		if r.wrap(clean) != clean {
			t.Errorf("%q: an error without the password was replaced", dsn)
		}
	}
	// A DSN that the driver could not parse still has its password found.
	r := newRedactor("host=h port=x password=Secret99", "")
	if err := r.wrap(errors.New("cannot parse password=Secret99")); strings.Contains(err.Error(), "Secret99") {
		t.Errorf("unparsed DSN: %q", err)
	}
}
