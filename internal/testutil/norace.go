//go:build !race

package testutil

// RaceDetector says this binary was built with -race.
const RaceDetector = false
