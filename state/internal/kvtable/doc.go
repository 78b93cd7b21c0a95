// Package kvtable is a hash table of encoded keys to encoded values for one
// key group of the memory state backend, with O(1) copy-on-write snapshots.
package kvtable
