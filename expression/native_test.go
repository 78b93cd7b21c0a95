package expression

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/ingest-engine/ingest/row"
)

// nativeSchema holds a field of each kind closures compile, twice.
var nativeSchema = &row.Schema{Fields: []row.Field{
	{Name: "i", Kind: row.Int}, {Name: "j", Kind: row.Int},
	{Name: "f", Kind: row.Float}, {Name: "g", Kind: row.Float},
	{Name: "s", Kind: row.String}, {Name: "t", Kind: row.String},
	{Name: "b", Kind: row.Bool}, {Name: "c", Kind: row.Bool},
}}

// randomExpr returns a random expression of kind k over nativeSchema, of
// at most depth levels: the operators closures compile, and some they do
// not (so mixed trees are covered too).
func randomExpr(rng *rand.Rand, k row.Kind, depth int) string {
	leaf := depth == 0 || rng.IntN(3) == 0
	switch k {
	case row.Int:
		if leaf {
			return []string{"i", "j", "0", "1", "-1", "7", "9223372036854775807", "123"}[rng.IntN(8)]
		}
		op := []string{"+", "-", "*", "%"}[rng.IntN(4)]
		if rng.IntN(8) == 0 {
			return "-(" + randomExpr(rng, row.Int, depth-1) + ")"
		}
		if rng.IntN(8) == 0 {
			return "(" + randomExpr(rng, row.Bool, depth-1) + " ? " + randomExpr(rng, row.Int, depth-1) + " : " + randomExpr(rng, row.Int, depth-1) + ")"
		}
		return "(" + randomExpr(rng, row.Int, depth-1) + " " + op + " " + randomExpr(rng, row.Int, depth-1) + ")"
	case row.Float:
		if leaf {
			return []string{"f", "g", "0.5", "0.908", "1e300", "0.0", "i * 1.0"}[rng.IntN(7)]
		}
		op := []string{"+", "-", "*", "/"}[rng.IntN(4)]
		num := func() string {
			if rng.IntN(2) == 0 {
				return randomExpr(rng, row.Int, depth-1)
			}
			return randomExpr(rng, row.Float, depth-1)
		}
		if op == "/" {
			return "(" + num() + " / " + num() + ")"
		}
		return "(" + randomExpr(rng, row.Float, depth-1) + " " + op + " " + num() + ")"
	case row.String:
		if leaf {
			return []string{"s", "t", `"a"`, `""`, `"é"`}[rng.IntN(5)]
		}
		if rng.IntN(6) == 0 {
			return "upper(" + randomExpr(rng, row.String, depth-1) + ")" // the VM's
		}
		return "(" + randomExpr(rng, row.String, depth-1) + " + " + randomExpr(rng, row.String, depth-1) + ")"
	}
	if leaf {
		return []string{"b", "c", "true", "false"}[rng.IntN(4)]
	}
	cmp := []string{"==", "!=", "<", "<=", ">", ">="}[rng.IntN(6)]
	switch rng.IntN(7) {
	case 0:
		return "(" + randomExpr(rng, row.Int, depth-1) + " " + cmp + " " + randomExpr(rng, row.Int, depth-1) + ")"
	case 1:
		return "(" + randomExpr(rng, row.Float, depth-1) + " " + cmp + " " + randomExpr(rng, row.Int, depth-1) + ")"
	case 2:
		return "(" + randomExpr(rng, row.String, depth-1) + " " + cmp + " " + randomExpr(rng, row.String, depth-1) + ")"
	case 3:
		return "(" + randomExpr(rng, row.Bool, depth-1) + []string{" and ", " or ", " && ", " || ", " == ", " != "}[rng.IntN(6)] + randomExpr(rng, row.Bool, depth-1) + ")"
	case 4:
		return "not (" + randomExpr(rng, row.Bool, depth-1) + ")"
	case 5:
		return "(" + randomExpr(rng, row.Int, depth-1) + " in [1, 2, 3])" // the VM's
	}
	return "!" + randomExpr(rng, row.Bool, depth-1)
}

// randomRow returns a row of nativeSchema with edge values and NULLs.
func randomRow(rng *rand.Rand) row.Row {
	ints := []int64{0, 1, -1, 2, 123, 246, math.MaxInt64, math.MinInt64, 1 << 53}
	floats := []float64{0, math.Copysign(0, -1), 0.5, -2.25, math.NaN(), math.Inf(1), math.Inf(-1), 1e308, 3}
	strs := []string{"", "a", "b", "é", "ab"}
	r := make(row.Row, len(nativeSchema.Fields))
	for i, f := range nativeSchema.Fields {
		if rng.IntN(10) == 0 {
			continue // NULL
		}
		switch f.Kind {
		case row.Int:
			r[i] = row.IntValue(ints[rng.IntN(len(ints))])
		case row.Float:
			r[i] = row.FloatValue(floats[rng.IntN(len(floats))])
		case row.String:
			r[i] = row.StringValue(strs[rng.IntN(len(strs))])
		case row.Bool:
			r[i] = row.BoolValue(rng.IntN(2) == 0)
		}
	}
	return r
}

// Programs compiled to closures give what the VM gives, value and error
// alike, over random expressions and rows with edge values and NULLs; and
// the expressions of filters and maps that matter (arithmetic and
// comparisons of fields and constants) are compiled.
func TestNativeMatchesTheVM(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	compiled, checked := 0, 0
	// expr's VM takes -0.0 and 0.0 constants for each other; a closure
	// would not, so a program with a -0.0 constant stays with the VM.
	fixed := []string{"f * 0.0 == -0.0 ? -0.0 : 0.0", "-0.0", "0.0 + -0.0"}
	for i := range 3000 + len(fixed) {
		k := []row.Kind{row.Int, row.Float, row.String, row.Bool}[rng.IntN(4)]
		src := randomExpr(rng, k, 3)
		if i >= 3000 {
			src = fixed[i-3000]
		}
		p, err := Compile(nativeSchema, src, row.Null)
		if err != nil {
			continue // e.g. a constant modulo by zero the checker refuses
		}
		if p.native == nil {
			continue
		}
		compiled++
		vmOnly := *p
		vmOnly.native = nil
		a, err := NewEvaluator(p)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := NewEvaluator(&vmOnly)
		for range 20 {
			r := randomRow(rng)
			a.Bind(r, 0)
			b.Bind(r, 0)
			got, gotErr := a.Value(p)
			want, wantErr := b.Value(&vmOnly)
			checked++
			if (gotErr == nil) != (wantErr == nil) || !sameValue(got, want) {
				t.Fatalf("%s over %v: native %v (%v), VM %v (%v)", src, r, got, gotErr, want, wantErr)
			}
			if k == row.Bool {
				gb, gErr := a.Bool(p)
				wb, wErr := b.Bool(&vmOnly)
				if (gErr == nil) != (wErr == nil) || gb != wb {
					t.Fatalf("%s over %v as a filter: native %v (%v), VM %v (%v)", src, r, gb, gErr, wb, wErr)
				}
			}
		}
	}
	if compiled < 300 {
		t.Fatalf("only %d of the random programs were compiled to closures", compiled)
	}
	t.Logf("%d programs compiled, %d evaluations alike", compiled, checked)
	for _, src := range []string{"price * 0.908", "auction % 123 == 0", "price > 100 and bidder != 7", "-price + 1", "name + \"x\" == \"ax\""} {
		schema := &row.Schema{Fields: []row.Field{{Name: "price", Kind: row.Int}, {Name: "auction", Kind: row.Int}, {Name: "bidder", Kind: row.Int}, {Name: "name", Kind: row.String}}}
		p, err := Compile(schema, src, row.Null)
		if err != nil || p.native == nil {
			t.Errorf("%s: not compiled to a closure (%v)", src, err)
		}
	}
}

// sameValue compares two results, NaNs alike.
func sameValue(a, b row.Value) bool {
	if a.Kind() == row.Float && b.Kind() == row.Float && math.IsNaN(a.Float()) && math.IsNaN(b.Float()) {
		return true
	}
	return a == b || fmt.Sprint(a) == fmt.Sprint(b) && a.Kind() == b.Kind() && a.Kind() != row.Float
}
