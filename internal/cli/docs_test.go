package cli_test

import (
	"os"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/polycrate/polycrate-operator/internal/cli"
)

// TestEveryFlagIsDocumented: each flag of each command appears in docs/cli.md,
// by its long name or its shorthand (`-o`), so a new flag cannot ship unexplained.
func TestEveryFlagIsDocumented(t *testing.T) {
	b, err := os.ReadFile("../../docs/cli.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if c.Name() == "completion" || c.Name() == "help" {
			return
		}
		c.Flags().VisitAll(func(f *pflag.Flag) {
			if f.Hidden || f.Name == "help" {
				return
			}
			if !strings.Contains(doc, "`--"+f.Name) && (f.Shorthand == "" || !strings.Contains(doc, "`-"+f.Shorthand)) {
				t.Errorf("%s --%s is not in docs/cli.md", c.CommandPath(), f.Name)
			}
		})
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(cli.NewRootCommand())
}
