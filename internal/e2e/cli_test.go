package e2e

import (
	"bufio"
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ingest-engine/ingest/internal/testkit"
)

// cliPipeline writes the contract pipeline for the CLI tests into dir:
// count 0 is unbounded, sink is "file" or "stdout".
func cliPipeline(t *testing.T, dir string, count int64, sink string) string {
	t.Helper()
	src := testkit.WindowPipeline{Name: "cli", Interval: 100 * time.Millisecond,
		Count: count, Rate: 20000, Keys: 10, Parallelism: 2, Sink: sink}.YAML()
	path := filepath.Join(dir, "p.yaml")
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// ingest runs the binary and returns stdout, stderr and the exit code.
func ingest(t *testing.T, bin string, args ...string) (string, string, int) {
	t.Helper()
	if len(args) > 0 && args[0] == "run" {
		// No HTTP server: tests run side by side, and 127.0.0.1:8080 is
		// the default of every `ingest run`.
		args = append([]string{"run", "--http="}, args[1:]...)
	}
	cmd := exec.Command(bin, args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		return out.String(), errb.String(), ee.ExitCode()
	case err != nil:
		t.Fatal(err)
	}
	return out.String(), errb.String(), 0
}

// The CLI contract of issue #2: validate prints the plan and the effective
// guarantee; configuration errors name the field and line and exit non-zero;
// a bounded run exits 0 after its final commit, and running it again does
// nothing more.
func TestCLI(t *testing.T) {
	bin := knBuild(t, t.TempDir())

	t.Run("validate", func(t *testing.T) {
		dir := t.TempDir()
		out, _, code := ingest(t, bin, "validate", cliPipeline(t, dir, 1000, "file"))
		if code != 0 || !strings.Contains(out, "delivery guarantee: exactly-once\n") || !strings.Contains(out, "per_key (parallelism 1)") {
			t.Fatalf("validate exit %d, output:\n%s", code, out)
		}
		out, _, code = ingest(t, bin, "validate", cliPipeline(t, dir, 1000, "stdout"))
		if code != 0 || !strings.Contains(out, "delivery guarantee: at-least-once\n  at-least-once: sink 'out' (stdout) is not transactional") {
			t.Fatalf("validate exit %d, output:\n%s", code, out)
		}
	})

	t.Run("configuration error", func(t *testing.T) {
		dir := t.TempDir()
		path := cliPipeline(t, dir, -5, "file")
		for _, cmd := range []string{"validate", "run"} {
			_, stderr, code := ingest(t, bin, cmd, path)
			if code != 2 || !strings.Contains(stderr, "p.yaml:9: sources.events.count: must be positive") {
				t.Fatalf("%s: exit %d, stderr:\n%s", cmd, code, stderr)
			}
		}
	})

	t.Run("bounded run", func(t *testing.T) {
		dir := t.TempDir()
		path := cliPipeline(t, dir, 20000, "file")
		if _, stderr, code := ingest(t, bin, "run", path); code != 0 {
			t.Fatalf("run exit %d, stderr:\n%s", code, stderr)
		}
		checkWindows(t, dir, 20000, 10)
		// The pipeline is finished: a second run restores its final
		// checkpoint, publishes nothing new and exits 0.
		if _, stderr, code := ingest(t, bin, "run", path); code != 0 {
			t.Fatalf("second run exit %d, stderr:\n%s", code, stderr)
		}
		checkWindows(t, dir, 20000, 10)
		out, _, code := ingest(t, bin, "checkpoints", "list", path)
		if code != 0 || !strings.Contains(out, "complete (final)") {
			t.Fatalf("checkpoints list exit %d:\n%s", code, out)
		}
	})

	t.Run("signals", func(t *testing.T) {
		dir := t.TempDir()
		path := cliPipeline(t, dir, 0, "file") // unbounded
		// SIGTERM: final checkpoint, commit, exit 0.
		cmd, lines := startCLI(t, bin, path)
		waitFor(t, lines, "restarts: ")
		time.Sleep(500 * time.Millisecond)
		if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		if err := cmd.Wait(); err != nil {
			t.Fatalf("after SIGTERM: %v", err)
		}
		first := committedFiles(t, dir)
		if first == 0 {
			t.Fatal("nothing committed before the graceful stop")
		}
		// Two signals: the second exits at once with 130.
		cmd, lines = startCLI(t, bin, path)
		waitFor(t, lines, "restored from checkpoint")
		cmd.Process.Signal(syscall.SIGINT)
		cmd.Process.Signal(syscall.SIGINT)
		err := cmd.Wait()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 130 {
			// The first signal may already have finished the stop: exit 0 then.
			if err != nil {
				t.Fatalf("after two signals: %v, want exit 130 (or 0 when the stop was already done)", err)
			}
		}
	})
}

func committedFiles(t *testing.T, dir string) int {
	t.Helper()
	lines, err := testkit.ReadCommitted(filepath.Join(dir, "data", "out"))
	if err != nil {
		t.Fatal(err)
	}
	return len(lines)
}

// startCLI starts `ingest run path` and streams its stderr lines.
func startCLI(t *testing.T, bin, path string) (*exec.Cmd, <-chan string) {
	t.Helper()
	cmd := exec.Command(bin, "run", "--http=", path)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill() })
	lines := make(chan string, 1024)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			select {
			case lines <- sc.Text():
			default:
			}
		}
	}()
	return cmd, lines
}

// waitFor reads lines until one contains s.
func waitFor(t *testing.T, lines <-chan string, s string) {
	t.Helper()
	deadline := time.After(20 * time.Second)
	for {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("the process ended before printing %q", s)
			}
			if strings.Contains(l, s) {
				return
			}
		case <-deadline:
			t.Fatalf("no line with %q within 20s", s)
		}
	}
}
