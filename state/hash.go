package state

import (
	"fmt"
	"math"
	"reflect"
	"unsafe"
)

// Key hashing decides which key group, and so which subtask and which
// snapshot section, a key lives in. It must therefore give the same answer in
// every process and every run, forever: hash/maphash and Go's map hash are
// seeded randomly and cannot be used. The functions here are fixed: FNV-1a 64
// for strings, the splitmix64 finalizer for integers, booleans and float bits.
// Changing any of them would strand every existing snapshot (Restore detects
// it: a key that no longer hashes to the key group it was stored in is an
// ErrStateMismatch).

// KeyHasher is implemented by key types that are not strings, integers,
// booleans or floats (composite keys such as structs). HashKey must return the
// same value for keys that are ==, and the same value in every process and
// run: do not hash pointers or use hash/maphash. It may be called on several
// goroutines at once (a restore checks the key groups of restored keys in
// parallel), so it must not write state shared between calls.
type KeyHasher interface{ HashKey() uint64 }

// HashKey returns the stable 64-bit hash of k. Supported key types are those
// Hasher accepts: any type whose underlying type is a string, integer, bool or
// float kind, and any type implementing KeyHasher. For other types it returns
// 0 (every such key would land in one key group): call Hasher first to check a
// type. For K an interface type, HashKey hashes the dynamic value.
//
// Integers hash by value whatever their width or signedness (int8(-1) and
// int64(-1) agree); floats hash float64 bits with +0 and -0 treated as equal.
// For strings and integers HashKey does not allocate.
func HashKey[K comparable](k K) uint64 {
	switch v := any(k).(type) {
	case string:
		return hashString(v)
	case int64:
		return hashUint64(uint64(v))
	case int:
		return hashUint64(uint64(v))
	case int32:
		return hashUint64(uint64(v))
	case int16:
		return hashUint64(uint64(v))
	case int8:
		return hashUint64(uint64(v))
	case uint64:
		return hashUint64(v)
	case uint:
		return hashUint64(uint64(v))
	case uint32:
		return hashUint64(uint64(v))
	case uint16:
		return hashUint64(uint64(v))
	case uint8:
		return hashUint64(uint64(v))
	case uintptr:
		return hashUint64(uint64(v))
	case bool:
		return hashBool(v)
	case float64:
		return hashFloat64(v)
	case float32:
		return hashFloat64(float64(v))
	}
	return hashOther(k)
}

// hashOther is HashKey for types other than the predeclared basic ones. It is
// a separate function so that the interface conversions it may need (which
// allocate) do not make HashKey's type switch allocate too; named basic types
// (type UserID int64) hash without allocating.
func hashOther[K comparable](k K) uint64 {
	t := reflect.TypeFor[K]()
	switch {
	case t.Kind() == reflect.Interface:
		return hashDynamic(any(k))
	case t.Implements(keyHasherType):
		return any(k).(KeyHasher).HashKey()
	}
	h, _ := hashByKind(t.Kind(), unsafe.Pointer(&k))
	return h
}

// hashDynamic hashes the dynamic value of an interface key that is not a
// predeclared basic type.
func hashDynamic(v any) uint64 {
	if h, ok := v.(KeyHasher); ok {
		return h.HashKey()
	}
	rv := reflect.ValueOf(v)
	if !rv.IsValid() {
		return 0 // nil interface
	}
	p := reflect.New(rv.Type())
	p.Elem().Set(rv)
	h, _ := hashByKind(rv.Kind(), p.UnsafePointer())
	return h
}

// hashByKind hashes the value at p, whose type has the given kind; ok is
// false for kinds without a stable hash. p must point to a value of a type
// with that kind (unsafe.Pointer rule (1): same size and layout as the basic
// type read here).
func hashByKind(kind reflect.Kind, p unsafe.Pointer) (h uint64, ok bool) {
	switch kind {
	case reflect.String:
		return hashString(*(*string)(p)), true
	case reflect.Int:
		return hashUint64(uint64(*(*int)(p))), true
	case reflect.Int8:
		return hashUint64(uint64(*(*int8)(p))), true
	case reflect.Int16:
		return hashUint64(uint64(*(*int16)(p))), true
	case reflect.Int32:
		return hashUint64(uint64(*(*int32)(p))), true
	case reflect.Int64:
		return hashUint64(uint64(*(*int64)(p))), true
	case reflect.Uint:
		return hashUint64(uint64(*(*uint)(p))), true
	case reflect.Uint8:
		return hashUint64(uint64(*(*uint8)(p))), true
	case reflect.Uint16:
		return hashUint64(uint64(*(*uint16)(p))), true
	case reflect.Uint32:
		return hashUint64(uint64(*(*uint32)(p))), true
	case reflect.Uint64:
		return hashUint64(*(*uint64)(p)), true
	case reflect.Uintptr:
		return hashUint64(uint64(*(*uintptr)(p))), true
	case reflect.Bool:
		return hashBool(*(*bool)(p)), true
	case reflect.Float32:
		return hashFloat64(float64(*(*float32)(p))), true
	case reflect.Float64:
		return hashFloat64(*(*float64)(p)), true
	}
	return 0, false
}

// Hasher returns a function that hashes keys of type K exactly as HashKey
// does, specialised once for K so the hot path neither reflects nor
// allocates. It returns an error naming the type when K cannot be hashed
// stably: pointers, channels, interfaces, and structs or arrays that do not
// implement KeyHasher.
//
// For a KeyHasher type the returned function is the method expression
// K.HashKey itself: no interface conversion, no allocation per key.
func Hasher[K comparable]() (func(K) uint64, error) {
	t := reflect.TypeFor[K]()
	if t.Implements(keyHasherType) {
		if t.Kind() != reflect.Interface {
			if m, ok := t.MethodByName("HashKey"); ok {
				if f, ok := m.Func.Interface().(func(K) uint64); ok {
					return f, nil
				}
			}
		}
		return func(k K) uint64 {
			if h, ok := any(k).(KeyHasher); ok { // not ok only for a nil interface key
				return h.HashKey()
			}
			return 0
		}, nil
	}
	// The conversions below reinterpret &k as a pointer to K's underlying
	// basic type: valid under unsafe.Pointer rule (1), since both types have
	// the same size and memory layout. This is what lets a named key type
	// (type UserID int64) hash without reflection or allocation.
	switch t.Kind() {
	case reflect.String:
		return func(k K) uint64 { return hashString(*(*string)(unsafe.Pointer(&k))) }, nil
	case reflect.Int:
		return func(k K) uint64 { return hashUint64(uint64(*(*int)(unsafe.Pointer(&k)))) }, nil
	case reflect.Int8:
		return func(k K) uint64 { return hashUint64(uint64(*(*int8)(unsafe.Pointer(&k)))) }, nil
	case reflect.Int16:
		return func(k K) uint64 { return hashUint64(uint64(*(*int16)(unsafe.Pointer(&k)))) }, nil
	case reflect.Int32:
		return func(k K) uint64 { return hashUint64(uint64(*(*int32)(unsafe.Pointer(&k)))) }, nil
	case reflect.Int64:
		return func(k K) uint64 { return hashUint64(uint64(*(*int64)(unsafe.Pointer(&k)))) }, nil
	case reflect.Uint:
		return func(k K) uint64 { return hashUint64(uint64(*(*uint)(unsafe.Pointer(&k)))) }, nil
	case reflect.Uint8:
		return func(k K) uint64 { return hashUint64(uint64(*(*uint8)(unsafe.Pointer(&k)))) }, nil
	case reflect.Uint16:
		return func(k K) uint64 { return hashUint64(uint64(*(*uint16)(unsafe.Pointer(&k)))) }, nil
	case reflect.Uint32:
		return func(k K) uint64 { return hashUint64(uint64(*(*uint32)(unsafe.Pointer(&k)))) }, nil
	case reflect.Uint64:
		return func(k K) uint64 { return hashUint64(*(*uint64)(unsafe.Pointer(&k))) }, nil
	case reflect.Uintptr:
		return func(k K) uint64 { return hashUint64(uint64(*(*uintptr)(unsafe.Pointer(&k)))) }, nil
	case reflect.Bool:
		return func(k K) uint64 { return hashBool(*(*bool)(unsafe.Pointer(&k))) }, nil
	case reflect.Float32:
		return func(k K) uint64 { return hashFloat64(float64(*(*float32)(unsafe.Pointer(&k)))) }, nil
	case reflect.Float64:
		return func(k K) uint64 { return hashFloat64(*(*float64)(unsafe.Pointer(&k))) }, nil
	}
	return nil, fmt.Errorf("state: key type %v cannot be hashed stably: use a string, integer, bool or float type, or implement HashKey() uint64", t)
}

var keyHasherType = reflect.TypeFor[KeyHasher]()

const (
	fnvOffset64 = 14695981039346656037
	fnvPrime64  = 1099511628211
)

// hashString is FNV-1a 64 over the string's bytes. It indexes the string
// directly, so it never allocates (hash/fnv would need a []byte copy).
func hashString(s string) uint64 {
	h := uint64(fnvOffset64)
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= fnvPrime64
	}
	return h
}

// hashUint64 is the splitmix64 finalizer.
func hashUint64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

func hashBool(b bool) uint64 {
	if b {
		return hashUint64(1)
	}
	return hashUint64(0)
}

// hashFloat64 hashes the IEEE bits, with -0 folded into +0 (they are ==) and
// every NaN folded into one (NaN keys can never be found again, but at least
// they all land in one key group).
func hashFloat64(f float64) uint64 {
	switch {
	case f == 0:
		return hashUint64(0)
	case f != f:
		return hashUint64(0x7ff8000000000001)
	}
	return hashUint64(math.Float64bits(f))
}
