// Package version holds the operator's build identity, injected with -ldflags -X.
package version

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

// Set at build time: -X github.com/polycrate/polycrate-operator/internal/version.Version=v0.1.0 (etc).
var (
	Version   = "dev"
	Commit    = "unknown"
	BuildDate = "unknown"
)

// Get returns the version, falling back to the module version when built with `go install`.
func Get() string {
	if Version != "dev" {
		return Version
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return Version
}

// String is the one-line description `polycrate-operator version` prints.
func String() string {
	return fmt.Sprintf("polycrate-operator %s (commit %s, built %s, %s %s/%s)",
		Get(), Commit, BuildDate, runtime.Version(), runtime.GOOS, runtime.GOARCH)
}
