// Package version holds the operator's build identity, injected with -ldflags -X.
package version

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"
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

// Release is the version a build reports, from the chart's appVersion and `git
// describe --tags --always --dirty`: the appVersion itself for a release build
// (HEAD is the tag v<appVersion> and the tree is clean), and otherwise
// <appVersion>-dev+<describe> (dots for the characters semver's build metadata
// does not take), which sorts before the release and says what it was built from.
func Release(appVersion, describe string) string {
	if describe == "v"+appVersion || describe == appVersion {
		return appVersion
	}
	meta := strings.Map(func(r rune) rune {
		switch {
		case r >= '0' && r <= '9', r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r == '-', r == '.':
			return r
		}
		return '.'
	}, describe)
	if meta == "" {
		meta = "unknown"
	}
	return appVersion + "-dev+" + strings.Trim(meta, ".")
}
