package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"

	"github.com/polycrate/polycrate-operator/internal/kube"
	"github.com/polycrate/polycrate-operator/internal/preflight"
)

// ErrPreflightFailed: a hard requirement of the checklist is missing (exit 1).
var ErrPreflightFailed = errors.New("preflight: a hard requirement is missing (see the rows marked missing)")

func newPreflightCommand() *cobra.Command {
	var kf kubeFlags
	var o preflight.Options
	var output string
	cmd := &cobra.Command{
		Use:   "preflight",
		Short: "Check a provided cluster against the checklist before the first deployment",
		Long: `Walk seed 004's checklist for a provided cluster ("Was der Cluster mitbringen muss") and print,
per row, the target (Soll), what the cluster shows (Ist), a verdict (ok, missing, warning, unknown)
and, for a miss, the consequence ("Wenn es fehlt"). A summary line comes first. Rows the cluster
cannot answer (the jump host, NTP on machines it cannot see) say unknown and why.

Rows: Kubernetes API (version ≥ --min-version), Rights (SelfSubjectAccessReview of the --profile
rights: deploy = namespaces, Deployments, CRDs; operator = this operator's own RBAC; a
cluster-admin is a warning), CNI (Nodes Ready; NetworkPolicy enforcement from known CNIs), CSI /
StorageClass (a default class; RWX where the provisioner says), Ingress or Gateway, DNS and NTP
(cluster DNS; node clocks from kubelet heartbeats against the API server's), Object storage (a
Velero BackupStorageLocation Available, or a Ready S3Bucket; in-cluster storage warns), Registry
pull (--pull-secret on the namespace's default ServiceAccount), Jump host.

Exits 1 when a hard requirement (Kubernetes API, Rights, CSI / StorageClass) is missing.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			switch output {
			case "table", "json", "yaml":
			default:
				return fmt.Errorf("unknown output format %q (table, json, yaml)", output)
			}
			cfg, err := kube.RESTConfig(kube.ConfigOptions{Kubeconfig: kf.kubeconfig, Context: kf.context, UserAgent: userAgent()})
			if err != nil {
				return err
			}
			rep := (&preflight.Checker{Config: cfg, Opts: o}).Run(cmd.Context())
			if err := printPreflight(cmd.OutOrStdout(), rep, output); err != nil {
				return err
			}
			if rep.Failed() {
				return ErrPreflightFailed
			}
			return nil
		},
	}
	kf.bind(cmd)
	f := cmd.Flags()
	f.StringVar(&o.MinVersion, "min-version", "1.27", "the lowest Kubernetes version the packages are tested with")
	f.StringVarP(&o.Namespace, "namespace", "n", "default", "the namespace the workloads go to (rights, pull secrets)")
	f.StringVar(&o.OperatorNamespace, "operator-namespace", "polycrate", "the operator's namespace (the rights of its Role, profile operator)")
	f.StringSliceVar(&o.Profiles, "profile", []string{"deploy", "operator"}, "rights to check: deploy, operator, cloud-controller")
	f.StringSliceVar(&o.PullSecrets, "pull-secret", nil, "registry pull secrets the team agreed on (must exist in --namespace and be on its default ServiceAccount)")
	f.StringVar(&o.RegistryMirror, "registry-mirror", "", "the registry mirror the team agreed on (reported)")
	f.StringVarP(&output, "output", "o", "table", "table, json or yaml")
	return cmd
}

func printPreflight(w io.Writer, rep *preflight.Report, output string) error {
	switch output {
	case "json":
		b, err := json.MarshalIndent(rep, "", "  ")
		if err != nil {
			return err
		}
		_, err = fmt.Fprintln(w, string(b))
		return err
	case "yaml":
		b, err := yaml.Marshal(rep)
		if err != nil {
			return err
		}
		_, err = w.Write(b)
		return err
	}
	fmt.Fprintln(w, rep.Summary)
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TOPIC\tVERDICT\tTARGET (SOLL)\tFOUND (IST)\tIF MISSING")
	for _, r := range rep.Rows {
		verdict := strings.ToUpper(string(r.Verdict))
		if r.Hard {
			verdict += " (hard)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", r.Topic, verdict, r.Target, r.Found, orDashString(r.Consequence))
	}
	return tw.Flush()
}

func orDashString(s string) string {
	if s == "" {
		return "–"
	}
	return s
}
