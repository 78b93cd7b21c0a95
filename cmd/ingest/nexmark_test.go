package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/ingest-engine/ingest/nexmark"
	"github.com/ingest-engine/ingest/nexmark/query"
)

// runNexmark runs "ingest nexmark args..." in-process and returns stdout.
func runNexmark(t *testing.T, args ...string) ([]byte, error) {
	t.Helper()
	cmd := nexmarkCmd()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&bytes.Buffer{})
	cmd.SetArgs(args)
	cmd.SilenceUsage, cmd.SilenceErrors = true, true
	err := cmd.Execute()
	return out.Bytes(), err
}

// TestNexmarkGenerateConfigB reproduces the golden file beam-config-b
// (../shared/nexmark/README.txt) byte for byte with the README's flags, on
// Beam's timeline.
func TestNexmarkGenerateConfigB(t *testing.T) {
	out, err := runNexmark(t, "generate", "--events", "20000", "--events-per-second", "0", "--num-event-generators", "1", "--first-event-rate", "10000")
	if err != nil {
		t.Fatalf("generate: %v", err)
	}
	if n := bytes.Count(out, []byte("\n")); n != 20000 {
		t.Fatalf("%d lines, want 20000", n)
	}
	sum := sha256.Sum256(out)
	if got, want := hex.EncodeToString(sum[:]), "d6fbf11a7b41e40a6bf3df26d32dc1ca12e2c8c1a8ec0e120dbf57749315dfd0"; got != want {
		t.Errorf("sha256 %s, want %s (beam-config-b.jsonl)", got, want)
	}
}

// TestNexmarkGenerateFrom: --from writes a slice of the same stream, which
// starts at Beam's base time with Beam's first person.
func TestNexmarkGenerateFrom(t *testing.T) {
	all, err := runNexmark(t, "generate", "--events", "300")
	if err != nil {
		t.Fatal(err)
	}
	tail, err := runNexmark(t, "generate", "--from", "100", "--events", "200")
	if err != nil {
		t.Fatal(err)
	}
	lines := bytes.SplitAfter(all, []byte("\n"))
	if want := bytes.Join(lines[100:], nil); !bytes.Equal(tail, want) {
		t.Errorf("--from 100 --events 200 differs from lines 100..299 of --events 300")
	}
	first := `{"type":"person","event_id":0,"id":1000,"name":"Peter Jones","email_address":"nhd@xcat.com","credit_card":"7241 7320 9143 4888","city":"Portland","state":"WY","date_time":1436918400000,`
	if !bytes.HasPrefix(all, []byte(first)) {
		t.Errorf("first line %s, want the prefix %s", lines[0], first)
	}
}

func TestNexmarkGenerateErrors(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"generate", "--hot-auction-ratio", "0"}, "hot_auction_ratio 0"},
		{[]string{"generate", "--rate-unit", "per-hour"}, "rate unit"},
		{[]string{"generate", "--rate-shape", "zipf"}, "rate shape"},
		{[]string{"generate", "--events", "-1"}, "--events -1"},
		{[]string{"generate", "--from", "-1"}, "--from -1"},
		{[]string{"generate", "--events", "9223372036854775807"}, "beyond"},
		{[]string{"generate", "--first-event-rate", "5"}, "--first-event-rate shapes Beam's timeline, which --events-per-second 200000 replaces: add --events-per-second 0"},
		{[]string{"generate", "--events-per-second", "1000", "--num-event-generators", "1"}, "--num-event-generators shapes Beam's timeline"},
	} {
		_, err := runNexmark(t, c.args...)
		var ee *exitError
		if err == nil || !strings.Contains(err.Error(), c.want) || !errors.As(err, &ee) || ee.code != exitConfig {
			t.Errorf("%v: %v, want a configuration error containing %q", c.args, err, c.want)
		}
	}
	// Rate units and shapes use Beam's names, in any case.
	if _, err := runNexmark(t, "generate", "--events", "10", "--events-per-second", "0", "--rate-unit", "per_minute", "--rate-shape", "square", "--next-event-rate", "5"); err != nil {
		t.Errorf("Beam's names: %v", err)
	}
}

// By default generate writes exactly the events ingest bench nexmark
// consumes: the same generator configuration and event-time density (not
// Beam's timeline, which --events-per-second 0 gives).
func TestNexmarkGenerateDefaultsAreTheBenchEvents(t *testing.T) {
	const n = 30_000 // 150 ms of event time at the bench's density
	out, err := runNexmark(t, "generate", "--events", fmt.Sprint(n))
	if err != nil {
		t.Fatal(err)
	}
	g, err := nexmark.NewGenerator(query.BenchGenerator(query.BenchEventsPerSecond))
	if err != nil {
		t.Fatal(err)
	}
	var want []byte
	for i := range int64(n) {
		want = append(nexmark.AppendJSON(want, g.Event(i)), '\n')
	}
	if !bytes.Equal(out, want) {
		t.Errorf("generate's default events differ from the bench's")
	}
	beam, err := runNexmark(t, "generate", "--events", fmt.Sprint(n), "--events-per-second", "0")
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(beam, out) {
		t.Errorf("Beam's timeline gives the same events as the bench's density")
	}
	bench := benchNexmarkCmd().Flags().Lookup("events-per-second").DefValue
	if gen := nexmarkGenerateCmd().Flags().Lookup("events-per-second").DefValue; gen != bench || bench != fmt.Sprint(query.BenchEventsPerSecond) {
		t.Errorf("--events-per-second defaults: generate %s, bench %s", gen, bench)
	}
	var help bytes.Buffer
	cmd := benchNexmarkCmd()
	cmd.SetOut(&help)
	if err := cmd.Help(); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(help.String(), "ingest nexmark\ngenerate the same --events and --events-per-second") {
		t.Errorf("the bench's help does not say how to write its events:\n%s", help.String())
	}
}
