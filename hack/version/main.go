// Command version prints the version `make` builds with (internal/version.Release):
// the chart's appVersion for a release build (HEAD tagged v<appVersion>, clean
// tree), <appVersion>-dev+<git describe> otherwise.
package main

import (
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strings"

	"github.com/polycrate/polycrate-operator/internal/version"
)

func main() {
	chart, err := os.ReadFile("config/helm/polycrate-operator/Chart.yaml")
	if err != nil {
		fmt.Fprintln(os.Stderr, "version:", err)
		os.Exit(1)
	}
	m := regexp.MustCompile(`(?m)^appVersion:\s*"?([^"\s]+)"?`).FindSubmatch(chart)
	if m == nil {
		fmt.Fprintln(os.Stderr, "version: no appVersion in Chart.yaml")
		os.Exit(1)
	}
	describe := "unknown"
	if out, err := exec.Command("git", "describe", "--tags", "--always", "--dirty").Output(); err == nil {
		describe = strings.TrimSpace(string(out))
	}
	fmt.Println(version.Release(string(m[1]), describe))
}
