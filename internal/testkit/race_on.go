//go:build race

package testkit

// RaceEnabled says the binary was built with -race (see DefaultSeeds).
const RaceEnabled = true
