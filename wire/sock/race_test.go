//go:build race

package sock

// raceEnabled scales the heavy tests down: the race detector slows every
// memory access and grows every allocation.
const raceEnabled = true
