package kafka

import (
	"strings"
	"testing"
)

func TestValidTopicName(t *testing.T) {
	for name, want := range map[string]bool{
		"":                       false,
		"a":                      true,
		"orders.v2_eu-1":         true,
		strings.Repeat("x", 249): true,
		strings.Repeat("x", 250): false,
		"with space":             false,
		"slash/topic":            false,
		"ünïcode":                false,
		"tab\t":                  false,
		"ABCxyz.._--0123456789":  true,
		"comma,separated":        false,
		"colon:topic":            false,
	} {
		if got := validTopicName(name); got != want {
			t.Errorf("validTopicName(%q) = %v, want %v", name, got, want)
		}
	}
}
