// Command benchguard compares the CPU time and peak memory of whole ingest
// processes built from two versions of this repository: a base commit and
// the working tree. It is the regression guard the before-stop routine runs
// (see docs/benchmarks.md):
//
//	go run ./internal/benchguard            # the working tree against HEAD~1
//	go run ./internal/benchguard -base 1e67ec2 -pairs 5
//
// Each workload runs -pairs times with each binary, interleaved (base first
// in odd pairs, the working tree first in even ones) so that a machine that
// gets busier or quieter affects both alike. The figures are the process's
// user + system CPU time and peak RSS (getrusage of the child), so they
// include what a go test -bench would miss: package initialisation, the
// garbage collector's reaction to the heap held from program start, the
// binary's size. It prints the medians and their ratios and exits 1 when a
// workload's CPU ratio exceeds -max-cpu or its RSS ratio exceeds -max-rss.
//
// The workloads: Nexmark q0 (stateless: generator, filter, projections) and
// q5 (sliding windows, state), and a YAML pipeline of datagen → 1 h tumbling
// window (count, sum) per key → file, whose state grows to 100,000 keys.
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"
)

// workload is one measured command line of the ingest binary.
type workload struct {
	name string
	args []string
	// files are written into the run's working directory first.
	files map[string]string
}

const windowedYAML = `pipeline: windowed
checkpoint:
  interval: 1s
  dir: checkpoints
sources:
  events:
    type: datagen
    count: 3000000
    keys: 100000
    event_interval: 1ms
transforms:
  per_key:
    type: window
    input: events
    key: key
    size: 1h
    aggregates:
      count: count()
      sum: sum(value)
sinks:
  out:
    type: file
    input: per_key
    path: out
`

var workloads = []workload{
	{name: "nexmark q0, 10 M events", args: []string{"bench", "nexmark", "--query", "q0", "--events", "10000000", "--events-per-second", "200000"}},
	{name: "nexmark q5, 10 M events", args: []string{"bench", "nexmark", "--query", "q5", "--events", "10000000", "--events-per-second", "200000"}},
	{name: "datagen → 1 h window → file, 3 M records, 100 K keys", args: []string{"run", "windowed.yaml"}, files: map[string]string{"windowed.yaml": windowedYAML}},
}

// sample is one run's cost.
type sample struct {
	cpu time.Duration // user + system
	rss int64         // peak resident set, bytes
}

func main() {
	base := flag.String("base", "HEAD~1", "the commit to compare the working tree against")
	pairs := flag.Int("pairs", 3, "runs of each workload with each binary")
	maxCPU := flag.Float64("max-cpu", 1.15, "largest acceptable ratio of median CPU time, working tree ÷ base")
	maxRSS := flag.Float64("max-rss", 1.25, "largest acceptable ratio of median peak RSS, working tree ÷ base")
	flag.Parse()
	if err := run(*base, *pairs, *maxCPU, *maxRSS); err != nil {
		fmt.Fprintln(os.Stderr, "benchguard:", err)
		os.Exit(1)
	}
}

func run(base string, pairs int, maxCPU, maxRSS float64) error {
	if pairs < 1 {
		return errors.New("-pairs must be at least 1")
	}
	tmp, err := os.MkdirTemp("", "benchguard-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)

	rev, err := output("git", "rev-parse", "--short", base)
	if err != nil {
		return fmt.Errorf("resolving -base %q: %w", base, err)
	}
	head, _ := output("git", "rev-parse", "--short", "HEAD")
	dirty, _ := output("git", "status", "--porcelain", "--untracked-files=no")
	headName := head
	if dirty != "" {
		headName += "+changes"
	}

	tree := filepath.Join(tmp, "base")
	if _, err := output("git", "worktree", "add", "--detach", tree, rev); err != nil {
		return fmt.Errorf("checking out %s: %w", rev, err)
	}
	defer output("git", "worktree", "remove", "--force", tree) //nolint:errcheck // best effort: the directory goes with tmp
	bins := [2]string{filepath.Join(tmp, "ingest-base"), filepath.Join(tmp, "ingest-head")}
	if err := build(tree, bins[0]); err != nil {
		return fmt.Errorf("building %s: %w", rev, err)
	}
	if err := build(".", bins[1]); err != nil {
		return fmt.Errorf("building the working tree: %w", err)
	}

	host, _ := os.Hostname()
	fmt.Printf("benchguard: base %s, working tree %s, %d pairs, interleaved, %s, %s\n", rev, headName, pairs, host, time.Now().UTC().Format(time.RFC3339))
	var failed []string
	for _, w := range workloads {
		var got [2][]sample
		for p := range pairs {
			order := []int{0, 1}
			if p%2 == 1 {
				order = []int{1, 0}
			}
			for _, b := range order {
				s, err := measure(tmp, bins[b], w)
				if err != nil {
					return fmt.Errorf("%s with %s: %w", w.name, [2]string{rev, headName}[b], err)
				}
				got[b] = append(got[b], s)
			}
		}
		bc, hc := medianCPU(got[0]), medianCPU(got[1])
		br, hr := medianRSS(got[0]), medianRSS(got[1])
		cpuRatio, rssRatio := hc.Seconds()/bc.Seconds(), float64(hr)/float64(br)
		verdict := "ok"
		if cpuRatio > maxCPU || rssRatio > maxRSS {
			verdict = "REGRESSION"
			failed = append(failed, w.name)
		}
		fmt.Printf("  %-55s CPU %6.2fs → %6.2fs (×%.2f)  peak RSS %6.1f → %6.1f MiB (×%.2f)  %s\n",
			w.name, bc.Seconds(), hc.Seconds(), cpuRatio, mib(br), mib(hr), rssRatio, verdict)
		fmt.Printf("  %-55s CPU samples base %v, tree %v\n", "", cpus(got[0]), cpus(got[1]))
	}
	if len(failed) > 0 {
		return fmt.Errorf("CPU above ×%.2f or peak RSS above ×%.2f of %s in: %s", maxCPU, maxRSS, rev, strings.Join(failed, "; "))
	}
	return nil
}

func build(dir, out string) error {
	cmd := exec.Command("go", "build", "-o", out, "./cmd/ingest")
	cmd.Dir = dir
	cmd.Stderr = os.Stderr
	return cmd.Run()
}

// measure runs w once with bin in a fresh directory under tmp.
func measure(tmp, bin string, w workload) (sample, error) {
	dir, err := os.MkdirTemp(tmp, "run-")
	if err != nil {
		return sample{}, err
	}
	defer os.RemoveAll(dir)
	for name, text := range w.files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			return sample{}, err
		}
	}
	cmd := exec.Command(bin, w.args...)
	cmd.Dir = dir
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return sample{}, fmt.Errorf("%w: %s", err, lastLines(stderr.String(), 5))
	}
	ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	if !ok {
		return sample{}, errors.New("no resource usage for the child on this platform")
	}
	cpu := time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	return sample{cpu: cpu, rss: ru.Maxrss * 1024}, nil // Linux reports ru_maxrss in KiB
}

func output(name string, args ...string) (string, error) {
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return strings.TrimSpace(string(out)), nil
}

func medianCPU(s []sample) time.Duration {
	v := make([]time.Duration, len(s))
	for i := range s {
		v[i] = s[i].cpu
	}
	slices.Sort(v)
	return v[len(v)/2]
}

func medianRSS(s []sample) int64 {
	v := make([]int64, len(s))
	for i := range s {
		v[i] = s[i].rss
	}
	slices.Sort(v)
	return v[len(v)/2]
}

func cpus(s []sample) string {
	parts := make([]string, len(s))
	for i := range s {
		parts[i] = fmt.Sprintf("%.2f", s[i].cpu.Seconds())
	}
	return strings.Join(parts, " ")
}

func mib(b int64) float64 { return float64(b) / (1 << 20) }

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
