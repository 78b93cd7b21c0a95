package runtime

import (
	"fmt"
	"strings"
)

// Physical is the plan as the runtime executes it, computed from the
// logical plan alone, before anything runs: which nodes share a task
// (chains), how many tasks each chain runs, and the channels between tasks.
// Job.build wires an attempt from it; `ingest validate` prints it.
type Physical struct {
	// Chains are the plan's tasks by kind: each chain runs as Parallelism
	// tasks (goroutines), subtask i of every node of the chain in task i.
	Chains []Chain
	// Exchanges are the edges between chains: each is a set of bounded
	// channels from the producing chain's tasks to the consuming chain's.
	Exchanges []Exchange
}

// Chain is nodes called one after the other in the same task: a node is
// chained into its producer's task when it has a single forward input from
// the main output of a node with a single out edge and equal parallelism.
// A chain starts with a source or with a node that reads channels.
//
// INVARIANT: a node with a consumer on a side output is the last of its
// chain, so only the last link of a task has side outputs.
type Chain struct {
	// Nodes are the chain's nodes, producer first.
	Nodes []*Node
}

// Head is the chain's first node: a source, or the node whose inputs are
// channels.
func (c Chain) Head() *Node { return c.Nodes[0] }

// Last is the node whose outputs leave the task.
func (c Chain) Last() *Node { return c.Nodes[len(c.Nodes)-1] }

// Parallelism is the chain's number of tasks.
func (c Chain) Parallelism() int { return c.Head().Parallelism }

// Exchange is one edge between tasks: From's output Output feeds input
// Edge.Input of To, the head of a chain, through one channel per pair of
// producer and consumer subtasks it connects.
type Exchange struct {
	// From produces; To is the consuming chain's head; Index is the edge's
	// position in To.Inputs.
	From, To *Node
	Index    int
	// Edge is To.Inputs[Index].
	Edge Edge
}

// Connects says whether producer subtask i sends to consumer subtask k: a
// forward edge connects subtask i to subtask i only, every other
// partitioner every pair.
func (x Exchange) Connects(i, k int) bool {
	return x.Edge.Partitioner.kind() != partitionForward || i == k
}

// Channels counts the exchange's channels.
func (x Exchange) Channels() int {
	if x.Edge.Partitioner.kind() == partitionForward {
		return min(x.From.Parallelism, x.To.Parallelism)
	}
	return x.From.Parallelism * x.To.Parallelism
}

// Physical computes the physical plan.
func (p *Plan) Physical() Physical {
	var ph Physical
	chainOf := map[*Node]int{}
	for _, n := range p.Nodes {
		if len(n.Inputs) == 1 {
			e := n.Inputs[0]
			if e.Partitioner.kind() == partitionForward && e.Output == "" && len(p.outputs(e.From)) == 1 && e.From.Parallelism == n.Parallelism {
				c := chainOf[e.From]
				ph.Chains[c].Nodes = append(ph.Chains[c].Nodes, n)
				chainOf[n] = c
				continue
			}
		}
		chainOf[n] = len(ph.Chains)
		ph.Chains = append(ph.Chains, Chain{Nodes: []*Node{n}})
	}
	for _, c := range ph.Chains {
		head := c.Head()
		if head.NewSource != nil {
			continue
		}
		for i, e := range head.Inputs {
			ph.Exchanges = append(ph.Exchanges, Exchange{From: e.From, To: head, Index: i, Edge: e})
		}
	}
	return ph
}

// Tasks counts the goroutines the plan runs (one per chain and subtask).
func (ph Physical) Tasks() int {
	n := 0
	for _, c := range ph.Chains {
		n += c.Parallelism()
	}
	return n
}

// String renders the physical plan: one line a chain with its tasks and
// nodes, one line an exchange with its partitioner and channels.
func (ph Physical) String() string {
	var b strings.Builder
	channels := 0
	for _, x := range ph.Exchanges {
		channels += x.Channels()
	}
	fmt.Fprintf(&b, "%s, %s\n", plural(ph.Tasks(), "task"), plural(channels, "channel"))
	for _, c := range ph.Chains {
		ids := make([]string, len(c.Nodes))
		for i, n := range c.Nodes {
			ids[i] = n.ID
		}
		fmt.Fprintf(&b, "  task %s ×%d\n", strings.Join(ids, " → "), c.Parallelism())
	}
	for _, x := range ph.Exchanges {
		from := x.From.ID
		if x.Edge.Output != "" {
			from += "." + x.Edge.Output
		}
		fmt.Fprintf(&b, "  channels %s ×%d → %s ×%d input %d: %s, %s\n", from, x.From.Parallelism, x.To.ID, x.To.Parallelism,
			x.Edge.Input, x.Edge.Partitioner, plural(x.Channels(), "channel"))
	}
	return b.String()
}

// plural is "1 task", "2 tasks".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
