//go:build race

package sandbox

// raceShadow scales a worker's memory budget (its RLIMIT_AS and its RSS
// watch) under the race detector, whose shadow memory grows with the heap
// it covers and counts against both.
const raceShadow = 4
