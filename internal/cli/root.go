// Package cli is the polycrate-operator command line: run, crds, install-crds,
// health, status and version.
package cli

import (
	"github.com/spf13/cobra"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/polycrate/polycrate-operator/internal/kube"
	"github.com/polycrate/polycrate-operator/internal/manager"
	"github.com/polycrate/polycrate-operator/internal/version"
)

// NewRootCommand builds the polycrate-operator command tree.
func NewRootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:   "polycrate-operator",
		Short: "Keeps a Kubernetes cluster in sync with the Polycrate API",
		Long: `The Polycrate Operator discovers Ingresses, HTTPRoutes, apps, Nodes, volumes, backups and
certificates, mirrors them as polycrate.io custom resources and synchronises them with the
Polycrate API. It is configured by one OperatorConfig named "default" in its namespace.`,
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRun: func(cmd *cobra.Command, _ []string) {
			// Commands other than run log little; give controller-runtime a logger so
			// it never complains that none was set. Not for run: controller-runtime
			// takes only the first logger it is given, and run builds its own from
			// its --zap-* flags.
			if cmd.Name() != "run" {
				ctrl.SetLogger(zap.New(zap.WriteTo(cmd.ErrOrStderr())))
			}
		},
	}
	root.AddCommand(
		newRunCommand(),
		newCRDsCommand(),
		newInstallCRDsCommand(),
		newHealthCommand(),
		newStatusCommand(),
		newCleanupCommand(),
		newVersionCommand(),
		newPreflightCommand(),
	)
	return root
}

func newVersionCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the operator's version",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, err := cmd.OutOrStdout().Write([]byte(version.String() + "\n"))
			return err
		},
	}
}

// kubeFlags are the connection flags shared by the commands that talk to a cluster.
type kubeFlags struct {
	kubeconfig string
	context    string
}

func (f *kubeFlags) bind(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.kubeconfig, "kubeconfig", "", "path to the kubeconfig (default $KUBECONFIG, else ~/.kube/config, else in-cluster)")
	cmd.Flags().StringVar(&f.context, "context", "", "kubeconfig context to use (default: the current context)")
}

func (f *kubeFlags) client() (client.Client, string, error) {
	cfg, err := kube.RESTConfig(kube.ConfigOptions{Kubeconfig: f.kubeconfig, Context: f.context, UserAgent: userAgent()})
	if err != nil {
		return nil, "", err
	}
	c, err := client.New(cfg, client.Options{Scheme: manager.NewScheme()})
	if err != nil {
		return nil, "", err
	}
	return c, cfg.Host, nil
}

func userAgent() string { return "polycrate-operator/" + version.Get() }
