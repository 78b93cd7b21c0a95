package checkpoint

import (
	"bufio"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ingest-engine/ingest/storage"
)

// Data-driven scripts in the style of etcd raft's interaction tests: each file
// in testdata/ is a sequence of commands, each followed by "----" and every
// action the coordinator returned, one per line. `go test ./checkpoint -run
// TestScripts -rewrite` regenerates the expected output; review the diff.
//
// Commands (times are offsets from the script's start, t0):
//
//	new tasks=a[0],b[0] [interval=10s timeout=30s min-pause=0s max-concurrent=1
//	    tolerable=0 retain=1 restored=N retained=N,N refs=N:M+M/g,N:M held=N,N
//	    next-id=N reserved=N]
//	                               (reserved: the durable ledger's reservation;
//	                               default 1000000, so that scripts not about
//	                               the ledger trigger without WriteLedger;
//	                               refs: Config.References, N references file
//	                               fM of M, or file g of M…; held: Config.Held)
//	tick <time>                    set the clock and step a Tick
//	at <time>                      set the clock only
//	ack <id> <task> [<p>:<data>…] [shared=M,M/g]
//	                               acknowledge with committables prepared at p,
//	                               and state that builds on file fM of M, file
//	                               g of M…
//	ack-all <id>                   every task acknowledges with an empty state
//	decline <id> <task>
//	written <id> [err]             MetadataWritten
//	committed <id> [err]           Committed
//	ledger-written [err]           LedgerWritten of the last WriteLedger
//	task-failed <task>
//	final                          RequestFinal
//	state                          latest, pending, consecutive failures
//	kept                           Retained() and Held(), a trimmed held
//	                               checkpoint with the files it keeps: 3{f3 g3}
//	last-abort                     the reason of the last Abort
//	metadata <id>                  the last WriteMetadata of id, its tasks and commits

var rewrite = flag.Bool("rewrite", false, "TestScripts: rewrite testdata/*.txt with the actual output")

func TestScripts(t *testing.T) {
	files, err := filepath.Glob("testdata/*.txt")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no scripts in testdata/")
	}
	for _, f := range files {
		t.Run(strings.TrimSuffix(filepath.Base(f), ".txt"), func(t *testing.T) { runScript(t, f) })
	}
}

// scriptBlock is one command of a script with the comment and blank lines
// before it and its expected output.
type scriptBlock struct {
	pre  []string
	line int
	cmd  string
	want []string
}

func parseScript(t *testing.T, path string) (blocks []scriptBlock, trailer []string) {
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	var lines []string
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	var pre []string
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		if strings.TrimSpace(l) == "" || strings.HasPrefix(l, "#") {
			pre = append(pre, l)
			continue
		}
		b := scriptBlock{pre: pre, line: i + 1, cmd: l}
		pre = nil
		if i+1 >= len(lines) || lines[i+1] != "----" {
			t.Fatalf("%s:%d: command %q is not followed by ----", path, i+1, l)
		}
		i += 2
		for ; i < len(lines) && lines[i] != ""; i++ {
			b.want = append(b.want, lines[i])
		}
		blocks = append(blocks, b)
	}
	return blocks, pre
}

func runScript(t *testing.T, path string) {
	blocks, trailer := parseScript(t, path)
	r := &scriptRunner{t: t, now: t0, writes: map[int64]*Metadata{}}
	var out strings.Builder
	for _, b := range blocks {
		got := r.run(path, b)
		for _, l := range b.pre {
			out.WriteString(l + "\n")
		}
		out.WriteString(b.cmd + "\n----\n")
		for _, l := range got {
			out.WriteString(l + "\n")
		}
		out.WriteString("\n")
		if !*rewrite && !slices.Equal(got, b.want) {
			t.Errorf("%s:%d: %s\n got:\n\t%s\nwant:\n\t%s", path, b.line, b.cmd,
				strings.Join(got, "\n\t"), strings.Join(b.want, "\n\t"))
		}
	}
	for _, l := range trailer {
		out.WriteString(l + "\n")
	}
	if *rewrite {
		s := strings.TrimRight(out.String(), "\n") + "\n"
		if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

type scriptRunner struct {
	t      *testing.T
	c      *Coordinator
	tasks  []TaskID
	now    time.Time
	writes map[int64]*Metadata
	// ledger is the last WriteLedger emitted.
	ledger WriteLedger
	// abort is the reason of the last Abort emitted.
	abort error
}

func (r *scriptRunner) run(path string, b scriptBlock) []string {
	t := r.t
	fail := func(format string, args ...any) []string {
		t.Fatalf("%s:%d: %s: %s", path, b.line, b.cmd, fmt.Sprintf(format, args...))
		return nil
	}
	f := strings.Fields(b.cmd)
	arg := func(i int) string {
		if i >= len(f) {
			fail("missing argument %d", i)
		}
		return f[i]
	}
	id := func(i int) int64 {
		n, err := strconv.ParseInt(arg(i), 10, 64)
		if err != nil {
			fail("bad id: %v", err)
		}
		return n
	}
	dur := func(s string) time.Duration {
		d, err := time.ParseDuration(s)
		if err != nil {
			fail("bad duration: %v", err)
		}
		return d
	}
	task := func(s string) TaskID {
		op, rest, ok := strings.Cut(s, "[")
		n, err := strconv.Atoi(strings.TrimSuffix(rest, "]"))
		if !ok || err != nil {
			fail("bad task %q, want op[n]", s)
		}
		return TaskID{Operator: op, Subtask: n}
	}
	var errArg error
	if len(f) > 2 && f[2] == "err" {
		errArg = errBoom
	}
	if f[0] != "new" && r.c == nil {
		return fail("no coordinator: start with new")
	}
	var ev Event
	switch f[0] {
	case "new":
		cfg := Config{Options: testOptions(), Pipeline: "script", JobID: "job", NextID: 1, Reserved: 1000000}
		for _, kv := range f[1:] {
			k, v, _ := strings.Cut(kv, "=")
			n, _ := strconv.Atoi(v)
			switch k {
			case "tasks":
				for _, s := range strings.Split(v, ",") {
					cfg.Tasks = append(cfg.Tasks, task(s))
				}
			case "interval":
				cfg.Options.Interval = dur(v)
			case "timeout":
				cfg.Options.Timeout = dur(v)
			case "min-pause":
				cfg.Options.MinPause = dur(v)
			case "max-concurrent":
				cfg.Options.MaxConcurrent = n
			case "tolerable":
				cfg.Options.TolerableFailures = n
			case "retain":
				cfg.Options.Retain = n
			case "restored":
				cfg.Restored = int64(n)
			case "next-id":
				cfg.NextID = int64(n)
			case "reserved":
				cfg.Reserved = int64(n)
			case "refs":
				cfg.References = map[int64][]storage.FileRef{}
				for _, e := range strings.Split(v, ",") {
					from, to, _ := strings.Cut(e, ":")
					x, _ := strconv.ParseInt(from, 10, 64)
					for _, r := range strings.Split(to, "+") {
						h, ok := scriptFile(r)
						if !ok {
							return fail("bad reference %q, want M or M/name", r)
						}
						cfg.References[x] = append(cfg.References[x], h.Ref())
					}
				}
			case "held":
				for _, s := range strings.Split(v, ",") {
					x, _ := strconv.ParseInt(s, 10, 64)
					cfg.Held = append(cfg.Held, x)
				}
			case "retained":
				for _, s := range strings.Split(v, ",") {
					x, _ := strconv.ParseInt(s, 10, 64)
					cfg.Retained = append(cfg.Retained, x)
				}
			default:
				return fail("unknown option %q", k)
			}
		}
		c, err := New(cfg)
		if err != nil {
			return []string{"error: " + err.Error()}
		}
		r.c, r.tasks, r.now = c, cfg.Tasks, t0
		return nil
	case "at", "tick":
		n := t0.Add(dur(arg(1)))
		if n.Before(r.now) {
			return fail("time goes backwards")
		}
		r.now = n
		if f[0] == "at" {
			return nil
		}
		ev = Tick{}
	case "ack":
		st := SubtaskState{Task: task(arg(2))}
		for _, c := range f[3:] {
			if files, ok := strings.CutPrefix(c, "shared="); ok {
				for _, m := range strings.Split(files, ",") {
					h, ok := scriptFile(m)
					if !ok {
						return fail("bad shared file %q, want M or M/name", m)
					}
					st.Shared = append(st.Shared, h)
				}
				continue
			}
			p, data, ok := strings.Cut(c, ":")
			n, err := strconv.ParseInt(p, 10, 64)
			if !ok || err != nil {
				return fail("bad committable %q, want p:data", c)
			}
			st.Committables = append(st.Committables, Committable{PreparedAt: n, Data: []byte(data)})
		}
		ev = Acked{ID: id(1), State: st}
	case "ack-all":
		var out []string
		for _, tk := range r.tasks {
			out = append(out, r.step(Acked{ID: id(1), State: SubtaskState{Task: tk}})...)
		}
		return out
	case "decline":
		ev = Declined{ID: id(1), Task: task(arg(2)), Reason: errBoom}
	case "written":
		ev = MetadataWritten{ID: id(1), Err: errArg}
	case "committed":
		ev = Committed{ID: id(1), Err: errArg}
	case "ledger-written":
		if len(f) > 1 && f[1] == "err" {
			errArg = errBoom
		}
		ev = LedgerWritten{Reserved: r.ledger.Reserved, Failed: r.ledger.Failed, Err: errArg}
	case "task-failed":
		ev = TaskFailed{Task: task(arg(1)), Err: errBoom}
	case "final":
		ev = RequestFinal{}
	case "state":
		return []string{fmt.Sprintf("latest=%d pending=%v failures=%d", r.c.LatestComplete(), r.c.Pending(), r.c.ConsecutiveFailures())}
	case "kept":
		var held []string
		for _, id := range r.c.Held() {
			h := strconv.FormatInt(id, 10)
			if names, ok := r.c.Trimmed(id); ok {
				h += "{" + strings.Join(names, " ") + "}"
			}
			held = append(held, h)
		}
		return []string{fmt.Sprintf("retained=%v held=[%s]", r.c.Retained(), strings.Join(held, " "))}
	case "last-abort":
		return []string{fmt.Sprint(r.abort)}
	case "metadata":
		m := r.writes[id(1)]
		if m == nil {
			return []string{"no metadata written"}
		}
		var tasks []string
		for _, st := range m.Tasks {
			tasks = append(tasks, st.Task.String())
		}
		return []string{
			fmt.Sprintf("id=%d final=%v triggered=%v completed=%v", m.ID, m.Final, m.TriggeredAt.Sub(t0), m.CompletedAt.Sub(t0)),
			"tasks=" + strings.Join(tasks, ","),
			"commits=" + fmtCommits(m.Commits),
		}
	default:
		return fail("unknown command")
	}
	return r.step(ev)
}

// scriptFile parses a file of a script's shared= and refs=: "M/name" is file
// name of checkpoint M, "M" alone file fM of M.
func scriptFile(s string) (storage.Handle, bool) {
	id, name, named := strings.Cut(s, "/")
	n, err := strconv.ParseInt(id, 10, 64)
	if err != nil || (named && name == "") {
		return storage.Handle{}, false
	}
	if !named {
		name = "f" + id
	}
	return storage.Handle{Name: name, Checkpoint: n}, true
}

func (r *scriptRunner) step(ev Event) []string {
	var out []string
	for _, a := range r.c.Step(r.now, ev) {
		if w, ok := a.(WriteMetadata); ok {
			r.writes[w.Metadata.ID] = w.Metadata
		}
		if w, ok := a.(WriteLedger); ok {
			r.ledger = w
		}
		if ab, ok := a.(Abort); ok {
			r.abort = ab.Reason
		}
		out = append(out, fmtAction(a))
	}
	return out
}
