package runtime

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/ingest-engine/ingest/state"
)

// Plan is a pipeline ready to execute: a graph of nodes, each with a
// parallelism, connected by partitioned edges.
type Plan struct {
	// Name is the pipeline's name, written into checkpoint metadata.
	Name string
	// MaxParallelism is the number of key groups keyed state is split into;
	// no node may have a larger parallelism. The default value is
	// state.DefaultMaxParallelism (128).
	MaxParallelism int
	// Nodes in any order; Validate sorts them topologically.
	Nodes []*Node
}

// Node is one operator of the graph. Exactly one of NewSource and NewOperator
// is set.
type Node struct {
	// ID names the node; it is the key of its state in checkpoints and must
	// stay the same across restarts.
	ID string
	// Parallelism is the number of subtasks.
	Parallelism int
	// NewSource creates a source subtask.
	NewSource func() Source
	// NewOperator creates an operator (or sink) subtask.
	NewOperator func() Operator
	// Committer publishes this sink's staged output; nil for nodes that do not
	// stage output.
	Committer Committer
	// Inputs are the edges feeding this node; Inputs[i].Input says which
	// logical input of the operator an edge feeds.
	Inputs []Edge
	// Guarantee is what this connector offers: ExactlyOnce for replayable
	// sources and transactional sinks.
	Guarantee Guarantee
	// Describe is a one-line description for plans (e.g. "datagen count=1000").
	Describe string
	// Type is the connector or operator type ("datagen", "file", "window"),
	// for messages.
	Type string
	// Capabilities are a connector's declared capabilities (its
	// connector.Descriptor's); nil for operators. Plans print them.
	Capabilities *Capabilities
	// SideOutputs names the node's side outputs: further typed outputs
	// besides the main one (late records of a window, for example), which the
	// operator writes through Context.SideOutput.
	SideOutputs []string
	// KeyDesc describes what a keyed node's state is keyed by, in words that
	// stay the same while the key does (the key field or expression of a
	// YAML spec, e.g. "field user"). Checkpoints record it, and restoring
	// keyed state into a node whose KeyDesc changed is refused: the state is
	// partitioned and looked up by the old key. Empty means undescribed (Go
	// API nodes unless a NodeOption sets it); the check is then skipped.
	KeyDesc string
	// RescalableInline says the node's per-subtask inline state (a source's
	// position) can be merged and split again: restored at another
	// parallelism, every subtask is given the inline state of every subtask
	// of the checkpoint (Context.RestoredUnion) and takes its share. Without
	// it a parallelism change of a node with inline state is refused.
	RescalableInline bool
	// DropsLate says the node's operator can drop late records (records
	// behind its watermark) and reports each with Context.DroppedLate: the
	// job exports the node's late-record count from its creation, at 0
	// until the first drop (Observation.LateRecords).
	DropsLate bool
}

// Edge connects the output of From to one logical input of a node.
type Edge struct {
	From *Node
	// Input is the logical input index at the consumer (0 for single-input operators).
	Input int
	// Partitioner decides which consumer subtask receives each record.
	Partitioner Partitioner
	// Output names the side output of From that the edge carries; "" is the
	// main output.
	Output string
}

// NodeIDPattern is what a node id must match: it names state files.
var NodeIDPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_-]*$`)

// Validate checks the plan and orders its nodes so every node comes after its
// inputs.
func (p *Plan) Validate() error {
	if p.MaxParallelism == 0 {
		p.MaxParallelism = state.DefaultMaxParallelism
	}
	var errs []error
	if p.MaxParallelism < 1 || p.MaxParallelism > state.UpperBoundMaxParallelism {
		return fmt.Errorf("max parallelism %d must be between 1 and %d", p.MaxParallelism, state.UpperBoundMaxParallelism)
	}
	seen := map[*Node]bool{}
	ids := map[string]bool{}
	for _, n := range p.Nodes {
		if !NodeIDPattern.MatchString(n.ID) {
			errs = append(errs, fmt.Errorf("node id %q: use letters, digits, '_' and '-', starting with a letter or digit", n.ID))
		}
		if ids[n.ID] {
			errs = append(errs, fmt.Errorf("node id %q used twice", n.ID))
		}
		ids[n.ID] = true
		seen[n] = true
		if n.Parallelism < 1 || n.Parallelism > p.MaxParallelism {
			errs = append(errs, fmt.Errorf("node %s: parallelism %d must be between 1 and the max parallelism %d", n.ID, n.Parallelism, p.MaxParallelism))
		}
		switch {
		case (n.NewSource == nil) == (n.NewOperator == nil):
			errs = append(errs, fmt.Errorf("node %s: exactly one of NewSource and NewOperator must be set", n.ID))
		case n.NewSource != nil && len(n.Inputs) > 0:
			errs = append(errs, fmt.Errorf("node %s: a source has no inputs", n.ID))
		case n.NewOperator != nil && len(n.Inputs) == 0:
			errs = append(errs, fmt.Errorf("node %s: an operator needs at least one input", n.ID))
		}
	}
	for _, n := range p.Nodes {
		for _, e := range n.Inputs {
			if !seen[e.From] {
				errs = append(errs, fmt.Errorf("node %s: input from a node that is not in the plan", n.ID))
				continue
			}
			if e.Partitioner == nil {
				errs = append(errs, fmt.Errorf("node %s: input from %s has no partitioner", n.ID, e.From.ID))
				continue
			}
			if e.Output != "" && !slices.Contains(e.From.SideOutputs, e.Output) {
				errs = append(errs, fmt.Errorf("node %s: input from side output %q of %s, which declares side outputs %q", n.ID, e.Output, e.From.ID, e.From.SideOutputs))
			}
			if e.Partitioner.kind() == partitionForward && e.From.Parallelism != n.Parallelism {
				errs = append(errs, fmt.Errorf("node %s: forward input from %s needs equal parallelism (%d vs %d); use rebalance or hash", n.ID, e.From.ID, e.From.Parallelism, n.Parallelism))
			}
		}
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	return p.sort()
}

// sort orders nodes topologically (Kahn), keeping the given order among
// independent nodes, and rejects cycles.
func (p *Plan) sort() error {
	var sorted []*Node
	placed := map[*Node]bool{}
	for len(sorted) < len(p.Nodes) {
		progress := false
		for _, n := range p.Nodes {
			if placed[n] {
				continue
			}
			ready := true
			for _, e := range n.Inputs {
				if !placed[e.From] {
					ready = false
				}
			}
			if ready {
				placed[n] = true
				sorted = append(sorted, n)
				progress = true
			}
		}
		if !progress {
			return errors.New("the pipeline graph has a cycle")
		}
	}
	p.Nodes = sorted
	return nil
}

// outputs returns the edges leaving n, in plan order.
func (p *Plan) outputs(n *Node) []outEdge {
	var out []outEdge
	for _, m := range p.Nodes {
		for i, e := range m.Inputs {
			if e.From == n {
				out = append(out, outEdge{to: m, index: i, edge: e})
			}
		}
	}
	return out
}

// outEdge is an edge seen from its producer: it feeds m.Inputs[index].
type outEdge struct {
	to    *Node
	index int
	edge  Edge
}

// Describe renders the plan, one line a node, with its chaining.
func (p *Plan) Describe() string {
	var b strings.Builder
	for _, chain := range p.Physical().Chains {
		for i, n := range chain.Nodes {
			prefix := "  "
			if i > 0 {
				prefix = "  ↳ chained "
			}
			fmt.Fprintf(&b, "%s%s (parallelism %d)", prefix, n.ID, n.Parallelism)
			if n.Describe != "" {
				fmt.Fprintf(&b, ": %s", n.Describe)
			}
			if n.Capabilities != nil {
				fmt.Fprintf(&b, " [%s]", n.Capabilities)
			}
			if n.KeyDesc != "" {
				fmt.Fprintf(&b, " {keyed state by %s}", n.KeyDesc)
			}
			for _, e := range n.Inputs {
				from := e.From.ID
				if e.Output != "" {
					from += "." + e.Output
				}
				fmt.Fprintf(&b, " <- %s [%s]", from, e.Partitioner)
			}
			b.WriteByte('\n')
		}
	}
	return b.String()
}
