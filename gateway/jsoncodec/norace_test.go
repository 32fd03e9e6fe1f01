//go:build !race

package jsoncodec

// raceEnabled is false without the race detector: allocation counts are exact.
const raceEnabled = false
