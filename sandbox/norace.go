//go:build !race

package sandbox

// raceShadow scales a worker's memory budget; 1 without the race detector
// (see race.go).
const raceShadow = 1
