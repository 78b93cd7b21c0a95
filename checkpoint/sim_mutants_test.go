package checkpoint

import (
	"strings"
	"testing"
	"time"
)

// A simulation that cannot fail checks nothing. Each case here breaks one
// thing the simulations claim to check — the aligner, through a wrapper that
// misbehaves the way a buggy Aligner would, or the committer and recovery
// models, through a switch, the coordinator's retention, through Discards and
// Trims added to its actions or changed (retentionMutant) — and requires the simulation to fail, with the
// check that case is about, within a bounded number of seeds. The logs give
// the seed that caught each.
func TestSimulationsCatchBugs(t *testing.T) {
	align := func(wrap func(*Aligner) alignerUnderTest) func(int64) string {
		return func(seed int64) string { return runAlignSimWith(seed, 0, wrap).err }
	}
	commit := func(mutant string) func(int64) string {
		return func(seed int64) string { return runCommitSimWith(seed, 0, mutant).err }
	}
	retention := func(mutant string) func(int64) string {
		return func(seed int64) string { return runSimWith(seed, 0, mutant).err }
	}
	cases := []struct {
		name   string
		run    func(seed int64) string
		want   []string // the failure must contain one of these
		within int64
	}{
		{"aligner releases an input early", align(func(a *Aligner) alignerUnderTest { return earlyRelease{a} }),
			[]string{"read before checkpoint", "Blocked("}, 200},
		{"aligner forgets aborts", align(func(a *Aligner) alignerUnderTest { return forgetAbort{a} }),
			[]string{"Abort{", "stale barrier"}, 200},
		{"aligner does not report an abandoned alignment", align(func(a *Aligner) alignerUnderTest { return hideAbandoned{a} }),
			[]string{"Abandoned = 0"}, 500},
		{"recovery skips the re-commit", commit("skip-recommit"), []string{"nothing committed is lost"}, 200},
		{"recovery abandons before re-committing", commit("abandon-first"), []string{"nothing committed is lost"}, 200},
		{"committer does not recognise a done commit", commit("not-idempotent"), []string{"visible twice", "nothing committed is lost"}, 200},
		{"recovery falls back past published output", commit("no-fallback-guard"), []string{"is visible after recovering", "visible twice"}, 500},
		{"recovery ignores the ledger's reservation", commit("ignore-ledger"), []string{"triggered before", "completed twice"}, 500},
		{"retire ignores references", retention("retire-ignores-references"),
			[]string{"retained checkpoint", "discarded while it is pending"}, 200},
		{"retention ignores what pending checkpoints may build on", retention("pending-unprotected"),
			[]string{"discarded while it is pending"}, 500},
		{"trim deletes a referenced file", retention("trim-too-much"),
			[]string{"which retained checkpoint", "references file", "while it is pending"}, 500},
	}
	for _, c := range cases {
		t.Run(strings.ReplaceAll(c.name, " ", "_"), func(t *testing.T) {
			for seed := int64(1); seed <= c.within; seed++ {
				err := c.run(seed)
				if err == "" {
					continue
				}
				for _, w := range c.want {
					if strings.Contains(err, w) {
						t.Logf("caught at seed %d: %s", seed, err)
						return
					}
				}
				t.Fatalf("seed %d failed with %q, want a failure containing one of %q", seed, err, c.want)
			}
			t.Fatalf("no seed of 1..%d failed", c.within)
		})
	}
}

// earlyRelease never holds input 0: records after a barrier on it are read
// before the snapshot.
type earlyRelease struct{ *Aligner }

func (a earlyRelease) Blocked(i int) bool { return i != 0 && a.Aligner.Blocked(i) }

// forgetAbort ignores the coordinator's aborts.
type forgetAbort struct{ *Aligner }

func (forgetAbort) Abort(int64) {}

// hideAbandoned drops Alignment.Abandoned: the task would never decline an
// alignment a newer barrier overtook.
type hideAbandoned struct{ *Aligner }

func (a hideAbandoned) Barrier(now time.Time, i int, id int64) Alignment {
	res := a.Aligner.Barrier(now, i, id)
	res.Abandoned = 0
	return res
}
