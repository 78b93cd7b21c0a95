package e2e

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/ingest-engine/ingest/internal/testkit"
)

var (
	soakKills = flag.Int("soak", 0, "TestSoak: run kill cycles of every scenario until this many SIGKILLs landed (0: skip the test)")
	soakSeed  = flag.Uint64("soakseed", 0, "TestSoak: seed of the first cycle; cycle i uses seed+i (0: random)")
)

// soakResult is what one kill cycle of a scenario found: how many SIGKILLs
// landed, and how the committed output and the sampled instants differ from
// the oracle.
type soakResult struct {
	Kills, Aimed int
	// Lost, Duplicated, Unexpected and Wrong compare the final committed
	// output with the expected windows (missing, more than once, not
	// expected, wrong count or sum or malformed).
	Lost, Duplicated, Unexpected, Wrong int
	// Partial counts sampled instants at which a reader saw part of a
	// checkpoint's output, or output of a checkpoint not complete yet.
	Partial int
	// Samples counts the instants the reader sampled.
	Samples  int
	Examples []string
}

// addReport adds the comparison of the final output with the oracle.
func (r *soakResult) addReport(rep testkit.Report) {
	r.Lost += rep.Missing
	r.Duplicated += rep.Duplicated
	r.Unexpected += rep.Unexpected
	r.Wrong += rep.Wrong + rep.Malformed
	if !rep.OK() {
		r.Examples = append(r.Examples, rep.String())
	}
}

// partial records a sampled instant that showed part of a checkpoint.
func (r *soakResult) partial(format string, args ...any) {
	r.Partial++
	if r.Partial <= 5 {
		r.Examples = append(r.Examples, fmt.Sprintf(format, args...))
	}
}

// violations is the number of everything the oracle objects to.
func (r soakResult) violations() int {
	return r.Lost + r.Duplicated + r.Unexpected + r.Wrong + r.Partial
}

func (r *soakResult) add(o soakResult) {
	r.Kills += o.Kills
	r.Aimed += o.Aimed
	r.Lost += o.Lost
	r.Duplicated += o.Duplicated
	r.Unexpected += o.Unexpected
	r.Wrong += o.Wrong
	r.Partial += o.Partial
	r.Samples += o.Samples
	r.Examples = append(r.Examples, o.Examples...)
}

// requireExact fails t unless r found nothing wrong.
func requireExact(t *testing.T, r soakResult, seed uint64) {
	t.Helper()
	t.Logf("%d SIGKILLs (%d at the aimed failpoint); %d sampled instants; lost %d, duplicated %d, unexpected %d, wrong %d, partial %d",
		r.Kills, r.Aimed, r.Samples, r.Lost, r.Duplicated, r.Unexpected, r.Wrong, r.Partial)
	if r.violations() > 0 {
		t.Errorf("the oracle objects (seed %d):\n  %s", seed, strings.Join(r.Examples, "\n  "))
	}
}

// soakScenario is one pipeline the soak kills over and over.
type soakScenario struct {
	name string
	run  func(t *testing.T, bin string, seed uint64) soakResult
}

var soakScenarios = []soakScenario{
	{"nats -> window -> file", natsScenario},
	{"kafka -> window -> kafka", kafkaScenario},
	{"kafka -> window -> postgres", kafkaPostgresScenario},
}

// TestSoak runs kill cycles of every scenario in turn until -soak SIGKILLs
// landed, then prints, per scenario, the kills and what the oracle found:
// lost, duplicated, unexpected and wrong windows in the committed output and
// sampled instants that showed part of a checkpoint. It runs only with
// -soak=N (the README's soak command); CI runs each scenario once through
// its own test.
func TestSoak(t *testing.T) {
	if *soakKills == 0 {
		t.Skip("the soak runs with -soak=N (e.g. go test ./internal/e2e -run TestSoak -soak=1000 -timeout 3h -v)")
	}
	seed := *soakSeed
	if seed == 0 {
		seed = rand.Uint64()
	}
	began := time.Now()
	bin := knBuild(t, t.TempDir())
	type row struct {
		cycles, failed int
		soakResult
	}
	rows := make([]row, len(soakScenarios))
	var total soakResult
	for cycle := 0; total.Kills < *soakKills; cycle++ {
		i := cycle % len(soakScenarios)
		sc := soakScenarios[i]
		s := seed + uint64(cycle)
		var res soakResult
		ok := t.Run(fmt.Sprintf("%d %s", cycle, sc.name), func(t *testing.T) {
			res = sc.run(t, bin, s)
			requireExact(t, res, s)
		})
		rows[i].cycles++
		if !ok {
			rows[i].failed++
		}
		rows[i].add(res)
		total.add(res)
		t.Logf("after cycle %d (%v): %d SIGKILLs, %d violations", cycle, time.Since(began).Round(time.Second), total.Kills, total.violations())
	}
	var b strings.Builder
	w := tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(w, "scenario\tcycles\tfailed cycles\tSIGKILLs\taimed\tsampled instants\tlost\tduplicated\tunexpected\twrong\tpartial\t")
	line := func(name string, cycles, failed int, r soakResult) {
		fmt.Fprintf(w, "%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t\n", name, cycles, failed, r.Kills, r.Aimed, r.Samples, r.Lost, r.Duplicated, r.Unexpected, r.Wrong, r.Partial)
	}
	cycles, failed := 0, 0
	for i, sc := range soakScenarios {
		line(sc.name, rows[i].cycles, rows[i].failed, rows[i].soakResult)
		cycles += rows[i].cycles
		failed += rows[i].failed
	}
	line("total", cycles, failed, total)
	_ = w.Flush()
	t.Logf("soak: first seed %d, %v\n%s", seed, time.Since(began).Round(time.Second), b.String())
}
