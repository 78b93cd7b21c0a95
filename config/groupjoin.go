package config

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/ingest-engine/ingest/operator/aggregate"
	"github.com/ingest-engine/ingest/operator/join"
	"github.com/ingest-engine/ingest/operator/window"
	"github.com/ingest-engine/ingest/row"
	"github.com/ingest-engine/ingest/stream"
	"go.yaml.in/yaml/v3"
)

// This file fuses an interval join and the GROUP BY that reads it into one
// operator (join.IntervalUntilGroups, a groupjoin) when the groups are the
// join's left records: the join is bounded by a left field (upper:
// left.<field>), its left input is unique by the key (unique: left), its
// lower bound is not negative, and its only reader is an aggregate that
// groups by the key and left fields and closes at the bound (closes_at).
// Such an aggregate has one group per left record, complete when the
// watermark passes the left record's bound; the fused operator folds each
// pair into its left record's group as it finds it, instead of making a
// row, sending it and keying it again. The result is the same rows at the
// same event times; the plan shows one node where the file has two.

// reader is a transform or sink that names a node as an input.
type reader struct {
	// closingAggregate is set for a transform of type aggregate with
	// closes_at.
	closingAggregate bool
}

// readersOf returns, per node name, the readers among the transforms and
// sinks of a file (their YAML mappings, nil when absent). A reference to a
// side output (node.output) counts as the node's. Malformed entries are
// skipped: building them reports them.
func readersOf(transforms, sinks *yaml.Node) map[string][]reader {
	out := map[string][]reader{}
	for _, top := range []*yaml.Node{transforms, sinks} {
		if top == nil || top.Kind != yaml.MappingNode {
			continue
		}
		for i := 1; i < len(top.Content); i += 2 {
			m := top.Content[i]
			if m.Kind != yaml.MappingNode {
				continue
			}
			fields := map[string]string{}
			for k := 0; k+1 < len(m.Content); k += 2 {
				if v := m.Content[k+1]; v.Kind == yaml.ScalarNode {
					fields[m.Content[k].Value] = strings.TrimSpace(v.Value)
				}
			}
			r := reader{closingAggregate: top == transforms && fields["type"] == "aggregate" && fields["closes_at"] != ""}
			for _, f := range refFields {
				if name, _, _ := strings.Cut(fields[f], "."); name != "" {
					out[name] = append(out[name], r)
				}
			}
		}
	}
	return out
}

// readByClosingAggregate reports whether node name's only reader is an
// aggregate with closes_at, which may fold it (groupJoin decides).
func (b *builder) readByClosingAggregate(name string) bool {
	rs := b.readers[name]
	return !b.embedded && len(rs) == 1 && rs[0].closingAggregate
}

// groupableJoin is an interval join with a unique left side, bounded by a
// left field, not built yet: its reader folds it (groupJoin) or builds it.
type groupableJoin struct {
	keys  [2]joinKey
	lower time.Duration
	until func(row.Row) (int64, bool)
	// upperField is the bound's left field, at upperIndex in left rows.
	upperField string
	upperIndex int
	sel        []joinField
	codecs     []join.Option
	par, keyed stream.NodeOption
	build      func() stream.Stream[row.Row]
}

// buildJoin builds the groupable join in (node name) as it stands, for a
// reader that does not fold it.
func (b *builder) buildJoin(name string, in named) named {
	in.s, in.groupable = in.groupable.build(), nil
	b.streams[name] = in
	return in
}

// pairRow fills dst with the join's output row of the pair (l, r) of key k.
func pairRow(dst row.Row, sel []joinField, k row.Value, l, r row.Row) row.Row {
	for i, f := range sel {
		switch f.side {
		case 0:
			dst[i] = l[f.index]
		case 1:
			dst[i] = r[f.index]
		default:
			dst[i] = k
		}
	}
	return dst
}

// groupJoin folds join j into the closing aggregate name over it, keyed by
// the join's fields at keys (the close time at keys[closeKey]), when every
// group is one left record: the key fields are the join key and left
// fields, and the close time is the join's bound. ok is false when they are
// not; the caller then builds the join. The fused node runs at the
// aggregate's parallelism (par): whether the two are fused does not depend
// on parallelism, so rescaling either keeps the plan's state layout.
func groupJoin(name string, j *groupableJoin, keys []int, closeKey int, cfg aggregate.Config, par stream.NodeOption, describe string) (stream.Stream[row.Row], bool) {
	if sel := j.sel[keys[closeKey]]; sel.side != 0 || sel.index != j.upperIndex {
		return stream.Stream[row.Row]{}, false
	}
	hasKey := false
	for _, k := range keys {
		switch f := j.sel[k]; {
		case f.side == 1:
			return stream.Stream[row.Row]{}, false // a right field: groups span left records
		case f.side == 2 || f.index == j.keys[0].index:
			hasKey = true
		}
	}
	if !hasKey {
		return stream.Stream[row.Row]{}, false
	}
	if j.keys[0].kind == row.Int {
		// An integer key as a struct of its value and NULL: a map hashes
		// and compares it without the string a row.Value holds.
		key := func(k joinKey) stream.KeyedStream[row.Row, intKey] {
			at := k.index
			ks := stream.KeyBy(k.rows, func(r row.Row) intKey { return intKeyOf(r[at]) })
			ks.KeyCodec = intKeyCodec{}
			return ks
		}
		return foldJoin(name, j, key(j.keys[0]), key(j.keys[1]), intKey.value, keys, cfg, par, describe), true
	}
	return foldJoin(name, j, j.keys[0].keyed, j.keys[1].keyed, func(k row.Value) row.Value { return k }, keys, cfg, par, describe), true
}

// foldJoin builds the groupjoin of j and the closing aggregate (see
// groupJoin) with state keyed by K, which value turns into the key's row
// value.
func foldJoin[K comparable](name string, j *groupableJoin, left, right stream.KeyedStream[row.Row, K], value func(K) row.Value,
	keys []int, cfg aggregate.Config, par stream.NodeOption, describe string) stream.Stream[row.Row] {
	// keyRow makes the key's part of a result from the left record, with
	// -0 as 0, as a GROUP BY's key is (listKey).
	keyRow := func(k K, l row.Row) row.Row {
		r := make(row.Row, len(keys))
		for i, f := range keys {
			v := value(k)
			if s := j.sel[f]; s.side == 0 {
				v = l[s.index]
			}
			if v.Kind() == row.Float && v.Float() == 0 {
				v = row.FloatValue(0)
			}
			r[i] = v
		}
		return r
	}
	groups := join.Groups[row.Row, row.Row, K, window.RowAcc, row.Row]{
		Codec: cfg.Agg.Codec,
		Clone: cfg.Agg.Clone,
		New: func() (join.Fold[row.Row, row.Row, K, window.RowAcc, row.Row], error) {
			var having func(row.Row, int64) (bool, error)
			if cfg.Having != nil {
				var err error
				if having, err = cfg.Having(); err != nil {
					return join.Fold[row.Row, row.Row, K, window.RowAcc, row.Row]{}, err
				}
			}
			// pair is the joined row the aggregates read, made in place:
			// they copy what they keep of it.
			pair := make(row.Row, len(j.sel))
			return join.Fold[row.Row, row.Row, K, window.RowAcc, row.Row]{
				Init: cfg.Agg.Init,
				Add: func(acc window.RowAcc, k K, l, r row.Row) window.RowAcc {
					return cfg.Agg.Add(acc, pairRow(pair, j.sel, value(k), l, r))
				},
				Result: func(k K, l row.Row, acc window.RowAcc, close int64) (row.Row, bool, error) {
					res := cfg.Result(keyRow(k, l), acc)
					if having == nil {
						return res, true, nil
					}
					keep, err := having(res, close)
					if err != nil {
						return nil, false, fmt.Errorf("HAVING: %w", err)
					}
					return res, keep, nil
				},
			}, nil
		},
	}
	opts := append(slices.Clone(j.codecs), join.NodeOptions(par, j.keyed))
	out := join.IntervalUntilGroups(left, right, name, j.lower, j.until, j.upperField, groups, opts...)
	out.Node().Describe += ": " + describe
	return out
}
