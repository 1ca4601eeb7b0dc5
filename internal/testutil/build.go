package testutil

import (
	"fmt"
	"os/exec"
)

// BuildOperator builds cmd/polycrate-operator to out as the Makefile does
// (OperatorBuildTags), with version injected unless it is empty. Under
// `go test -race` (make race) the binary gets the race detector too, so the
// suites that run the built binary (e2e, chaos, fleet) check its goroutines as
// well; make race sets GORACE=halt_on_error=1, which turns a race into a crash
// the suite sees, its report in the process's log.
func BuildOperator(out, version string) error {
	args := []string{"build", "-tags", OperatorBuildTags, "-o", out}
	if RaceDetector {
		args = append(args, "-race")
	}
	if version != "" {
		args = append(args, "-ldflags", "-X github.com/polycrate/polycrate-operator/internal/version.Version="+version)
	}
	build := exec.Command("go", append(args, "./cmd/polycrate-operator")...)
	build.Dir = RepoRoot()
	if b, err := build.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %s: %w: %s", version, err, b)
	}
	return nil
}
