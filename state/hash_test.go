package state

import (
	"hash/fnv"
	"math"
	"strings"
	"testing"
)

// These values are part of the snapshot format: a key's hash decides the key
// group, and so the section, it is stored in. If this test fails, existing
// snapshots can no longer be restored. Do not update the constants; fix the hash.
func TestHashKeyIsStable(t *testing.T) {
	for _, c := range []struct {
		name string
		got  uint64
		want uint64
	}{
		{`""`, HashKey(""), 0xcbf29ce484222325},
		{`"hello"`, HashKey("hello"), 0xa430d84680aabd0b},
		{"int64(0)", HashKey(int64(0)), 0},
		{"int64(42)", HashKey(int64(42)), 0xa759ea27d4727622},
		{"int64(-1)", HashKey(int64(-1)), 0xb4d055fcf2cbbd7b},
		{"true", HashKey(true), 0x5692161d100b05e5},
		{"1.5", HashKey(1.5), 0xe72b41d4576e3468},
		{"uint64(1<<63)", HashKey(uint64(1 << 63)), 0x25c26ea579cea98a},
	} {
		if c.got != c.want {
			t.Errorf("HashKey(%s) = %#x, want %#x", c.name, c.got, c.want)
		}
	}
	if kg := KeyGroupFor(HashKey("hello"), 128); kg != 68 {
		t.Errorf(`KeyGroupFor(HashKey("hello"), 128) = %d, want 68`, kg)
	}
	if kg := KeyGroupFor(HashKey(int64(42)), 128); kg != 84 {
		t.Errorf("KeyGroupFor(HashKey(int64(42)), 128) = %d, want 84", kg)
	}
}

func TestHashStringIsFNV1a(t *testing.T) {
	for _, s := range []string{"", "a", "hello", strings.Repeat("xyz", 100), "日本語"} {
		h := fnv.New64a()
		h.Write([]byte(s))
		if got, want := HashKey(s), h.Sum64(); got != want {
			t.Errorf("HashKey(%q) = %#x, FNV-1a 64 = %#x", s, got, want)
		}
	}
}

type userID int64
type region string
type score float64

type compositeKey struct {
	Tenant string
	ID     int64
}

func (k compositeKey) HashKey() uint64 { return HashKey(k.Tenant)*31 + HashKey(k.ID) }

// checkHasher verifies that Hasher[K] exists and agrees with HashKey on keys.
func checkHasher[K comparable](t *testing.T, keys ...K) {
	t.Helper()
	h, err := Hasher[K]()
	if err != nil {
		t.Fatalf("Hasher[%T]: %v", keys[0], err)
	}
	for _, k := range keys {
		if got, want := h(k), HashKey(k); got != want {
			t.Errorf("Hasher[%T](%v) = %#x, HashKey = %#x", k, k, got, want)
		}
	}
}

func TestHasherAgreesWithHashKey(t *testing.T) {
	checkHasher(t, "", "a", "hello")
	checkHasher(t, int64(0), 1, -1, math.MaxInt64, math.MinInt64)
	checkHasher(t, 0, 1, -1, 1<<40)
	checkHasher(t, int8(-3), int8(127))
	checkHasher(t, int16(-3), int16(300))
	checkHasher(t, int32(-3), int32(1<<30))
	checkHasher(t, uint(3), 1<<40)
	checkHasher(t, uint8(3), uint8(255))
	checkHasher(t, uint16(3), uint16(65535))
	checkHasher(t, uint32(3), uint32(1<<31))
	checkHasher(t, uint64(3), math.MaxUint64)
	checkHasher(t, uintptr(7))
	checkHasher(t, true, false)
	checkHasher(t, float32(1.5), float32(-2), float32(math.Inf(1)))
	checkHasher(t, 1.5, -2.0, math.Inf(-1), math.Copysign(0, -1))
	checkHasher(t, userID(42), userID(-7))
	checkHasher(t, region("eu"), region(""))
	checkHasher(t, score(0.25))
	checkHasher(t, compositeKey{"a", 1}, compositeKey{"b", 2})
}

func TestHashKeyEquivalences(t *testing.T) {
	// Integers hash by value whatever their type; named types as their base.
	if HashKey(int8(-1)) != HashKey(int64(-1)) || HashKey(uint8(200)) != HashKey(int64(200)) || HashKey(42) != HashKey(int64(42)) {
		t.Error("integers of equal value hash differently across widths")
	}
	if HashKey(userID(42)) != HashKey(int64(42)) || HashKey(region("eu")) != HashKey("eu") {
		t.Error("a named type hashes differently from its underlying type")
	}
	// +0 == -0, so they must hash alike (they are the same map key).
	if HashKey(0.0) != HashKey(math.Copysign(0, -1)) || HashKey(float32(0)) != HashKey(float32(math.Copysign(0, -1))) {
		t.Error("+0 and -0 hash differently")
	}
	if HashKey(float32(1.5)) != HashKey(1.5) {
		t.Error("float32 and float64 of the same value hash differently")
	}
	if HashKey(math.NaN()) != HashKey(math.Float64frombits(0x7ff8000000000abc)) {
		t.Error("NaNs hash differently")
	}
	if HashKey(compositeKey{"a", 1}) != (compositeKey{"a", 1}).HashKey() {
		t.Error("HashKey ignores the KeyHasher method")
	}
}

func TestHasherRejectsUnstableTypes(t *testing.T) {
	check := func(name string, err error) {
		t.Helper()
		if err == nil {
			t.Errorf("Hasher[%s] succeeded, want an error", name)
		} else if !strings.Contains(err.Error(), name) {
			t.Errorf("Hasher[%s] error %q does not name the type", name, err)
		}
	}
	type plain struct{ A int }
	_, err := Hasher[plain]()
	check("state.plain", err)
	_, err = Hasher[*int]()
	check("*int", err)
	_, err = Hasher[[2]int]()
	check("[2]int", err)
	_, err = Hasher[any]()
	check("interface {}", err)
	if HashKey(plain{1}) != 0 || HashKey(plain{2}) != 0 {
		t.Error("HashKey of an unsupported type must return 0")
	}
}

func TestHashKeyDoesNotAllocate(t *testing.T) {
	s := strings.Repeat("k", 40)
	var sink uint64
	i := int64(1 << 40)
	for name, f := range map[string]func(){
		"HashKey[int64]":  func() { sink += HashKey(i); i++ },
		"HashKey[string]": func() { sink += HashKey(s) },
		"HashKey[userID]": func() { sink += HashKey(userID(i)); i++ },
	} {
		if a := testing.AllocsPerRun(1000, f); a != 0 {
			t.Errorf("%s allocates %.1f times per call", name, a)
		}
	}
	hi, _ := Hasher[int64]()
	hs, _ := Hasher[string]()
	hu, _ := Hasher[userID]()
	if a := testing.AllocsPerRun(1000, func() { sink += hi(i) + hs(s) + hu(userID(i)); i++ }); a != 0 {
		t.Errorf("Hasher functions allocate %.1f times per call", a)
	}
	_ = sink
}

// HashKey on an interface-typed key hashes the dynamic value.
func TestHashKeyOnInterfaceKeys(t *testing.T) {
	for _, k := range []any{int64(5), "x", userID(9), region("r"), compositeKey{"a", 1}} {
		var want uint64
		switch v := k.(type) {
		case int64:
			want = HashKey(v)
		case string:
			want = HashKey(v)
		case userID:
			want = HashKey(v)
		case region:
			want = HashKey(v)
		case compositeKey:
			want = HashKey(v)
		}
		if got := HashKey(k); got != want {
			t.Errorf("HashKey(any(%#v)) = %#x, want %#x", k, got, want)
		}
	}
	if HashKey[any](nil) != 0 {
		t.Error("HashKey(nil interface) must be 0")
	}
}
