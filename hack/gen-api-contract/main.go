// Command gen-api-contract writes the emulator's resource table into
// docs/api-contract.md between its generated-table markers.
package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/polycrate/polycrate-operator/internal/emulator"
)

func main() {
	path := "docs/api-contract.md"
	if len(os.Args) > 1 {
		path = os.Args[1]
	}
	b, err := os.ReadFile(path)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	doc := string(b)
	i, j := strings.Index(doc, emulator.ContractBegin), strings.Index(doc, emulator.ContractEnd)
	if i < 0 || j < i {
		fmt.Fprintf(os.Stderr, "%s: generated-table markers not found\n", path)
		os.Exit(1)
	}
	out := doc[:i+len(emulator.ContractBegin)] + "\n\n" + emulator.ContractMarkdown() + doc[j:]
	if err := os.WriteFile(path, []byte(out), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
