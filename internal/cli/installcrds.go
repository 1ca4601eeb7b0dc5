package cli

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/polycrate/polycrate-operator/internal/crds"
	"github.com/polycrate/polycrate-operator/internal/version"
)

func newInstallCRDsCommand() *cobra.Command {
	var kf kubeFlags
	var dryRun bool
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "install-crds",
		Short: "Install or upgrade the operator's CRDs in the cluster (server-side apply)",
		Long: `Apply the CRDs embedded in this binary with server-side apply. Idempotent: it reports for
each CRD whether it was created, updated or unchanged, and waits until all are Established.
With --dry-run the API server validates everything and nothing is changed.`,
		Example: `  polycrate-operator install-crds
  polycrate-operator install-crds --kubeconfig ~/.kube/admin.yaml
  polycrate-operator install-crds --dry-run`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			all, err := crds.All()
			if err != nil {
				return err
			}
			c, host, err := kf.client()
			if err != nil {
				return err
			}
			results, err := crds.Install(cmd.Context(), c, all, crds.InstallOptions{DryRun: dryRun, EstablishTimeout: timeout, Version: version.Get()})
			out := cmd.OutOrStdout()
			suffix := ""
			if dryRun {
				suffix = " (server dry run)"
			}
			counts := map[crds.Action]int{}
			for _, r := range results {
				counts[r.Action]++
				fmt.Fprintf(out, "customresourcedefinition.apiextensions.k8s.io/%s %s%s\n", r.Name, r.Action, suffix)
				if r.Reason != "" {
					fmt.Fprintf(out, "  (%s)\n", r.Reason)
				}
			}
			if err != nil {
				return fmt.Errorf("installing CRDs into %s: %w", host, err)
			}
			summary := fmt.Sprintf("%d CRDs: %d created, %d updated, %d unchanged", len(results),
				counts[crds.Created], counts[crds.Updated], counts[crds.Unchanged])
			if counts[crds.Skipped] > 0 {
				summary += fmt.Sprintf(", %d skipped", counts[crds.Skipped])
			}
			if dryRun {
				fmt.Fprintf(out, "%s — dry run against %s, nothing was changed\n", summary, host)
			} else {
				fmt.Fprintf(out, "%s — all established in %s\n", summary, host)
			}
			return nil
		},
	}
	kf.bind(cmd)
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "validate with a server-side dry run and report what would change, changing nothing")
	cmd.Flags().DurationVar(&timeout, "timeout", 60*time.Second, "how long to wait for the CRDs to become Established")
	return cmd
}
