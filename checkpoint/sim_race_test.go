//go:build race

package checkpoint

// raceEnabled is set when the tests run with -race; the simulations' default
// seed counts are scaled down then (see simDefaultSeeds).
const raceEnabled = true
