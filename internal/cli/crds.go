package cli

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/polycrate/polycrate-operator/internal/crds"
)

func newCRDsCommand() *cobra.Command {
	var kind, outputDir string
	var list bool
	cmd := &cobra.Command{
		Use:   "crds",
		Short: "Print the operator's CustomResourceDefinitions",
		Long: `Print the CRDs embedded in this binary as YAML (for kubectl apply or GitOps),
list them, or write one file per kind into a directory.`,
		Example: `  polycrate-operator crds | kubectl apply -f -
  polycrate-operator crds --kind OperatorConfig
  polycrate-operator crds --output-dir ./crds/
  polycrate-operator crds --list`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			all, err := crds.All()
			if err != nil {
				return err
			}
			selected := all
			if kind != "" {
				c, err := crds.Lookup(all, kind)
				if err != nil {
					return err
				}
				selected = []crds.CRD{c}
			}
			out := cmd.OutOrStdout()
			switch {
			case list:
				tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "KIND\tPLURAL\tSHORTNAMES\tSCOPE\tNAME")
				for _, c := range selected {
					short := strings.Join(c.ShortNames(), ",")
					if short == "" {
						short = "-"
					}
					fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", c.Kind(), c.Plural(), short, c.Scope(), c.Object.Name)
				}
				return tw.Flush()
			case outputDir != "":
				if err := os.MkdirAll(outputDir, 0o755); err != nil {
					return fmt.Errorf("creating %s: %w", outputDir, err)
				}
				for _, c := range selected {
					p := filepath.Join(outputDir, c.FileName)
					if err := os.WriteFile(p, crds.Render([]crds.CRD{c}), 0o644); err != nil {
						return fmt.Errorf("writing %s: %w", p, err)
					}
					fmt.Fprintf(out, "wrote %s (%s)\n", p, c.Kind())
				}
				return nil
			default:
				_, err := out.Write(crds.Render(selected))
				return err
			}
		},
	}
	cmd.Flags().StringVar(&kind, "kind", "", "only this kind (kind, plural or short name, e.g. OperatorConfig, endpoints, s3)")
	cmd.Flags().BoolVar(&list, "list", false, "list the kinds with their plural and short names instead of printing YAML")
	cmd.Flags().StringVar(&outputDir, "output-dir", "", "write one YAML file per CRD into this directory instead of stdout")
	cmd.MarkFlagsMutuallyExclusive("list", "output-dir")
	return cmd
}
