package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/duration"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	polycratev1alpha1 "github.com/polycrate/polycrate-operator/api/v1alpha1"
	"github.com/polycrate/polycrate-operator/internal/crds"
)

// statusReport is what status prints; -o json|yaml print it as it is.
type statusReport struct {
	Cluster        string       `json:"cluster"`
	OperatorConfig string       `json:"operatorConfig"`
	Kinds          []statusKind `json:"kinds"`
}

type statusKind struct {
	Kind      string       `json:"kind"`
	Installed bool         `json:"installed"`
	Items     []statusItem `json:"items"`
}

// statusItem is one object: its phase and, when it is not Ready, why; for an
// Endpoint its check state and last check.
type statusItem struct {
	Name      string `json:"name"`
	Namespace string `json:"namespace,omitempty"`
	// Phase is capitalized for every kind (Synced, Pending, Error, Ready): the
	// Endpoint CR keeps the seed's lower case in status.phase, status prints
	// one spelling.
	Phase   string `json:"phase,omitempty"`
	Ready   string `json:"ready,omitempty"`
	Reason  string `json:"reason,omitempty"`
	Message string `json:"message,omitempty"`
	// Check is an Endpoint's check state: up, down, or unknown (not checked by
	// this cluster's operator yet); LastCheck when the last check ran.
	Check     string       `json:"check,omitempty"`
	LastCheck *metav1.Time `json:"lastCheck,omitempty"`
}

// phaseCase is the one spelling status prints a phase in: its first letter
// in upper case (Kubernetes' convention, as a Pod's phase).
func phaseCase(p string) string {
	if p == "" {
		return ""
	}
	return strings.ToUpper(p[:1]) + p[1:]
}

func newStatusCommand() *cobra.Command {
	var kf kubeFlags
	var namespace, opNamespace, output string
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Show every Polycrate custom resource in the cluster with its phase",
		Long: `Print the operator's resources, one section per kind with NAME, NAMESPACE and PHASE
(Endpoints add CHECK — up, down or unknown — and LAST CHECK; -o wide adds READY, REASON and
MESSAGE: why an object is not synced; -o json|yaml prints all of it). Phases are printed
capitalized for every kind (the Endpoint CR's status.phase is lower case, as in the seed).
Reads the cluster directly: works whether or not the operator is running.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			switch output {
			case "table", "wide", "json", "yaml":
			default:
				return fmt.Errorf("unknown output format %q: use table, wide, json or yaml", output)
			}
			c, host, err := kf.client()
			if err != nil {
				return err
			}
			r, err := collectStatus(cmd.Context(), c, host, namespace, opNamespace)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			switch output {
			case "json":
				enc := json.NewEncoder(out)
				enc.SetIndent("", "  ")
				return enc.Encode(r)
			case "yaml":
				b, err := yaml.Marshal(r)
				if err != nil {
					return err
				}
				_, err = out.Write(b)
				return err
			}
			fmt.Fprintln(out, "Polycrate Operator Status")
			fmt.Fprintln(out, "=========================")
			fmt.Fprintf(out, "Cluster: %s\n", r.Cluster)
			fmt.Fprintf(out, "OperatorConfig: %s\n", r.OperatorConfig)
			for _, k := range r.Kinds {
				title := k.Kind + "s"
				fmt.Fprintf(out, "\n%s\n%s\n", title, strings.Repeat("-", len(title)))
				if !k.Installed {
					fmt.Fprintln(out, "  (CRD not installed: run 'polycrate-operator install-crds')")
					continue
				}
				writeStatusSection(out, k.Items, output == "wide", k.Kind == "Endpoint", time.Now())
			}
			return nil
		},
	}
	kf.bind(cmd)
	cmd.Flags().StringVarP(&namespace, "namespace", "n", "", "only resources in this namespace (default: all namespaces)")
	cmd.Flags().StringVar(&opNamespace, "operator-namespace", defaultNamespace(), "the operator's namespace, where its OperatorConfig lives ($POD_NAMESPACE)")
	cmd.Flags().StringVarP(&output, "output", "o", "table", "table, wide (with the reason of every object that is not Ready), json or yaml")
	return cmd
}

// collectStatus reads every kind's objects, sorted by namespace and name.
func collectStatus(ctx context.Context, c client.Client, host, namespace, opNamespace string) (*statusReport, error) {
	all, err := crds.All()
	if err != nil {
		return nil, err
	}
	r := &statusReport{Cluster: host, OperatorConfig: operatorConfigSummary(ctx, c, opNamespace), Kinds: []statusKind{}}
	for _, crd := range all {
		k := statusKind{Kind: crd.Object.Spec.Names.Kind, Installed: true, Items: []statusItem{}}
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(polycratev1alpha1.GroupVersion.WithKind(crd.Kind() + "List"))
		var opts []client.ListOption
		if namespace != "" && crd.Scope() == "Namespaced" {
			opts = append(opts, client.InNamespace(namespace))
		}
		if err := c.List(ctx, list, opts...); err != nil {
			if !meta.IsNoMatchError(err) {
				return nil, fmt.Errorf("listing %s in %s: %w", crd.Plural(), host, err)
			}
			k.Installed = false
		}
		for _, it := range list.Items {
			item := statusItem{Name: it.GetName(), Namespace: it.GetNamespace()}
			phase, _, _ := unstructured.NestedString(it.Object, "status", "phase")
			item.Phase = phaseCase(phase)
			if k.Kind == "Endpoint" {
				item.Check = "unknown"
				if state, _, _ := unstructured.NestedString(it.Object, "status", "monitoring", "state"); state != "" {
					item.Check = state
				}
				if at, _, _ := unstructured.NestedString(it.Object, "status", "monitoring", "lastCheckAt"); at != "" {
					if t, err := time.Parse(time.RFC3339, at); err == nil {
						item.LastCheck = &metav1.Time{Time: t}
					}
				}
			}
			conds, _, _ := unstructured.NestedSlice(it.Object, "status", "conditions")
			for _, c := range conds {
				if m, ok := c.(map[string]any); ok && m["type"] == polycratev1alpha1.ConditionReady {
					item.Ready, _ = m["status"].(string)
					if item.Ready != string(metav1.ConditionTrue) {
						item.Reason, _ = m["reason"].(string)
						item.Message, _ = m["message"].(string)
					}
				}
			}
			k.Items = append(k.Items, item)
		}
		sort.Slice(k.Items, func(i, j int) bool {
			if k.Items[i].Namespace != k.Items[j].Namespace {
				return k.Items[i].Namespace < k.Items[j].Namespace
			}
			return k.Items[i].Name < k.Items[j].Name
		})
		r.Kinds = append(r.Kinds, k)
	}
	return r, nil
}

func writeStatusSection(out io.Writer, items []statusItem, wide, checks bool, now time.Time) {
	if len(items) == 0 {
		fmt.Fprintln(out, "  (none)")
		return
	}
	dash := func(s string) string {
		if s == "" {
			return "-"
		}
		return s
	}
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	header := []string{"NAME", "NAMESPACE", "PHASE"}
	if checks {
		header = append(header, "CHECK", "LAST CHECK")
	}
	if wide {
		header = append(header, "READY", "REASON", "MESSAGE")
	}
	fmt.Fprintln(tw, "  "+strings.Join(header, "\t"))
	for _, it := range items {
		row := []string{it.Name, dash(it.Namespace), dash(it.Phase)}
		if checks {
			last := "-"
			if it.LastCheck != nil {
				last = duration.HumanDuration(now.Sub(it.LastCheck.Time)) + " ago"
			}
			row = append(row, dash(it.Check), last)
		}
		if wide {
			row = append(row, dash(it.Ready), dash(it.Reason), dash(it.Message))
		}
		fmt.Fprintln(tw, "  "+strings.Join(row, "\t"))
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
