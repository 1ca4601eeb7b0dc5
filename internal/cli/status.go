package cli

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	polycratev1alpha1 "github.com/polycrate/polycrate-operator/api/v1alpha1"
	"github.com/polycrate/polycrate-operator/internal/crds"
)

func newStatusCommand() *cobra.Command {
	var kf kubeFlags
	var namespace, opNamespace string
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Show every Polycrate custom resource in the cluster with its phase",
		Long: `Print the operator's resources, one section per kind with NAME, NAMESPACE and PHASE.
Reads the cluster directly: works whether or not the operator is running.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, host, err := kf.client()
			if err != nil {
				return err
			}
			all, err := crds.All()
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			fmt.Fprintln(out, "Polycrate Operator Status")
			fmt.Fprintln(out, "=========================")
			fmt.Fprintf(out, "Cluster: %s\n", host)
			fmt.Fprintf(out, "OperatorConfig: %s\n", operatorConfigSummary(cmd.Context(), c, opNamespace))
			for _, crd := range all {
				title := crd.Object.Spec.Names.Kind + "s"
				fmt.Fprintf(out, "\n%s\n%s\n", title, strings.Repeat("-", len(title)))
				list := &unstructured.UnstructuredList{}
				list.SetGroupVersionKind(polycratev1alpha1.GroupVersion.WithKind(crd.Kind() + "List"))
				var opts []client.ListOption
				if namespace != "" && crd.Scope() == "Namespaced" {
					opts = append(opts, client.InNamespace(namespace))
				}
				if err := c.List(cmd.Context(), list, opts...); err != nil {
					if meta.IsNoMatchError(err) {
						fmt.Fprintln(out, "  (CRD not installed: run 'polycrate-operator install-crds')")
						continue
					}
					return fmt.Errorf("listing %s in %s: %w", crd.Plural(), host, err)
				}
				writeStatusSection(out, list.Items)
			}
			return nil
		},
	}
	kf.bind(cmd)
	cmd.Flags().StringVarP(&namespace, "namespace", "n", "", "only resources in this namespace (default: all namespaces)")
	cmd.Flags().StringVar(&opNamespace, "operator-namespace", defaultNamespace(), "the operator's namespace, where its OperatorConfig lives ($POD_NAMESPACE)")
	return cmd
}

func writeStatusSection(out io.Writer, items []unstructured.Unstructured) {
	if len(items) == 0 {
		fmt.Fprintln(out, "  (none)")
		return
	}
	sort.Slice(items, func(i, j int) bool {
		if items[i].GetNamespace() != items[j].GetNamespace() {
			return items[i].GetNamespace() < items[j].GetNamespace()
		}
		return items[i].GetName() < items[j].GetName()
	})
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  NAME\tNAMESPACE\tPHASE")
	for _, it := range items {
		phase, _, _ := unstructured.NestedString(it.Object, "status", "phase")
		if phase == "" {
			phase = "-"
		}
		ns := it.GetNamespace()
		if ns == "" {
			ns = "-"
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\n", it.GetName(), ns, phase)
	}
	_ = tw.Flush()
}

// operatorConfigSummary says whether the singleton exists and how it is doing.
func operatorConfigSummary(ctx context.Context, c client.Client, ns string) string {
	oc := &polycratev1alpha1.OperatorConfig{}
	err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: polycratev1alpha1.DefaultOperatorConfigName}, oc)
	switch {
	case apierrors.IsNotFound(err):
		return fmt.Sprintf("none in namespace %s — the operator discovers nothing until one exists", ns)
	case meta.IsNoMatchError(err):
		return "CRD not installed"
	case err != nil:
		return "cannot read: " + err.Error()
	}
	ready := meta.FindStatusCondition(oc.Status.Conditions, polycratev1alpha1.ConditionReady)
	if ready == nil {
		return fmt.Sprintf("%s/default (not reconciled yet)", ns)
	}
	return fmt.Sprintf("%s/default Ready=%s (%s: %s)", ns, ready.Status, ready.Reason, ready.Message)
}
