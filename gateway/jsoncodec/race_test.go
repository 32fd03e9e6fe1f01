//go:build race

package jsoncodec

// raceEnabled: the race detector drops sync.Pool items at random, so what comes from a pool
// is sometimes allocated anew and allocation counts move by one.
const raceEnabled = true
