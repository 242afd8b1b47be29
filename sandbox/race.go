//go:build race

package sandbox

// raceShadow scales a worker's RLIMIT_DATA budget under the race detector,
// whose shadow memory grows with the heap (about 2–3 times the heap it
// covers) and counts against the same limit.
const raceShadow = 4
