package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/polycrate/polycrate-operator/api/v1alpha1"
	"github.com/polycrate/polycrate-operator/internal/controller/apisync"
	"github.com/polycrate/polycrate-operator/internal/crds"
	"github.com/polycrate/polycrate-operator/internal/liveconfig"
	"github.com/polycrate/polycrate-operator/internal/polycrate"
)

// The sources the operator puts finalizers on.
var finalizedSources = []struct {
	gvk       schema.GroupVersionKind
	finalizer string
}{
	{schema.GroupVersionKind{Group: "networking.k8s.io", Version: "v1", Kind: "Ingress"}, v1.FinalizerIngressDiscovery},
	{schema.GroupVersionKind{Group: "gateway.networking.k8s.io", Version: "v1", Kind: "HTTPRoute"}, v1.FinalizerHTTPRouteDiscovery},
}

// ownFinalizer: every finalizer the operator sets on its own CRs.
func ownFinalizer(f string) bool {
	return strings.HasPrefix(f, "polycrate.io/") && strings.HasSuffix(f, "-cleanup")
}

// cleanupOptions steer a cleanup run.
type cleanupOptions struct {
	// ScaleDown names the operator's Deployment (in Namespace) to scale to zero
	// first, so it cannot put finalizers back (the chart's pre-delete hook).
	ScaleDown string
	// ScaleDownTimeout is how long to wait for its replicas to stop.
	ScaleDownTimeout time.Duration
	RetireAPI        bool
	DryRun           bool
	Namespace        string // the operator's: token Secret and OperatorConfig, for --retire-api
}

func newCleanupCommand() *cobra.Command {
	var kf kubeFlags
	var o cleanupOptions
	cmd := &cobra.Command{
		Use:   "cleanup",
		Short: "Remove the operator's finalizers from sources and its own resources (before an uninstall)",
		Long: `Remove every finalizer the operator set — on Ingresses and HTTPRoutes, and on its own custom
resources — so that nothing hangs in deletion once the operator is gone. The Helm chart runs this in
a pre-delete hook.

With --retire-api the API objects of the operator's resources are retired first, as the operator's
finalizers would: endpoints, hosts, volumes, backups, schedules and certificates are deleted, K8s apps
are marked uninstalled and inactive (agents may not delete them). S3 buckets are never deleted by
cleanup; their credentials Secrets stay. Without --retire-api the API keeps its objects.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, _, err := kf.client()
			if err != nil {
				return err
			}
			return runCleanup(cmd.Context(), c, cmd.OutOrStdout(), o)
		},
	}
	kf.bind(cmd)
	cmd.Flags().BoolVar(&o.RetireAPI, "retire-api", false, "retire the API objects of the operator's resources before removing the finalizers")
	cmd.Flags().BoolVar(&o.DryRun, "dry-run", false, "only print what would be changed")
	cmd.Flags().StringVar(&o.ScaleDown, "scale-down", "", "first scale this Deployment (the operator's, in --operator-namespace) to zero and wait for it")
	cmd.Flags().DurationVar(&o.ScaleDownTimeout, "scale-down-timeout", 2*time.Minute, "how long --scale-down waits for the operator to stop; still running then, cleanup removes nothing")
	cmd.Flags().StringVar(&o.Namespace, "operator-namespace", defaultNamespace(), "the operator's namespace: its OperatorConfig and token Secret, for --retire-api ($POD_NAMESPACE)")
	return cmd
}

func runCleanup(ctx context.Context, c client.Client, out io.Writer, o cleanupOptions) error {
	if o.ScaleDown != "" && !o.DryRun {
		if err := scaleDown(ctx, c, out, o.Namespace, o.ScaleDown, o.ScaleDownTimeout); err != nil {
			return err
		}
	}
	var api *polycrate.Client
	var snap *liveconfig.Snapshot
	if o.RetireAPI && !o.DryRun {
		var err error
		if api, snap, err = apiClientFromCluster(ctx, c, o.Namespace); err != nil {
			return fmt.Errorf("--retire-api: %w", err)
		}
	}
	// The synced kinds retire their API objects exactly as their finalizers would
	// (apisync's registry); S3 buckets, clusters and the configuration keep theirs.
	synced := map[string]apisync.Registered{}
	for _, k := range apisync.Kinds(apisync.Deps{}) {
		synced[k.CRKind()] = k
	}
	total := 0
	for _, src := range finalizedSources {
		n, err := stripFinalizers(ctx, c, out, src.gvk, func(f string) bool { return f == src.finalizer }, nil, o.DryRun)
		if err != nil {
			return err
		}
		total += n
	}
	all, err := crds.All()
	if err != nil {
		return err
	}
	for _, crd := range all {
		gvk := v1.GroupVersion.WithKind(crd.Kind())
		var retire func(*unstructured.Unstructured) error
		if k, ok := synced[crd.Kind()]; ok && api != nil {
			retire = func(o *unstructured.Unstructured) error { return k.Retire(ctx, api, snap, o) }
		}
		n, err := stripFinalizers(ctx, c, out, gvk, ownFinalizer, retire, o.DryRun)
		if err != nil {
			return err
		}
		total += n
	}
	verb := "removed"
	if o.DryRun {
		verb = "would remove"
	}
	fmt.Fprintf(out, "cleanup: %s the operator's finalizers from %d objects\n", verb, total)
	return nil
}

// scaleDown scales the operator's Deployment to zero and waits until no replica
// runs; a missing Deployment is fine. A replica still running after the timeout
// is an error: it would put back the finalizers cleanup removes.
func scaleDown(ctx context.Context, c client.Client, out io.Writer, namespace, name string, timeout time.Duration) error {
	d := &appsv1.Deployment{}
	if err := c.Get(ctx, types.NamespacedName{Namespace: namespace, Name: name}, d); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("reading Deployment %s/%s: %w", namespace, name, err)
	}
	patch := client.MergeFrom(d.DeepCopy())
	zero := int32(0)
	d.Spec.Replicas = &zero
	if err := c.Patch(ctx, d, patch); err != nil {
		return fmt.Errorf("scaling Deployment %s/%s to zero: %w", namespace, name, err)
	}
	fmt.Fprintf(out, "scaled Deployment %s/%s to zero\n", namespace, name)
	deadline := time.Now().Add(timeout)
	for {
		if err := c.Get(ctx, client.ObjectKeyFromObject(d), d); err != nil {
			if apierrors.IsNotFound(err) {
				return nil
			}
			return fmt.Errorf("reading Deployment %s/%s: %w", namespace, name, err)
		}
		if d.Status.Replicas == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the Deployment %s/%s still runs %d replica(s) after %s; nothing was removed (a running operator would put the finalizers back): stop it, or raise --scale-down-timeout",
				namespace, name, d.Status.Replicas, timeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

// stripFinalizers removes the matching finalizers from every object of a kind
// (a kind whose CRD is not installed is skipped).
func stripFinalizers(ctx context.Context, c client.Client, out io.Writer, gvk schema.GroupVersionKind, match func(string) bool,
	retire func(*unstructured.Unstructured) error, dryRun bool) (int, error) {
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
	if err := c.List(ctx, list); err != nil {
		if meta.IsNoMatchError(err) || apierrors.IsNotFound(err) {
			return 0, nil
		}
		return 0, fmt.Errorf("listing %s: %w", gvk.Kind, err)
	}
	n := 0
	for i := range list.Items {
		o := &list.Items[i]
		keep := slices.DeleteFunc(slices.Clone(o.GetFinalizers()), match)
		if len(keep) == len(o.GetFinalizers()) {
			continue
		}
		n++
		name := gvk.Kind + " " + strings.TrimPrefix(o.GetNamespace()+"/"+o.GetName(), "/")
		if dryRun {
			fmt.Fprintf(out, "would remove finalizers from %s\n", name)
			continue
		}
		if retire != nil {
			if err := retire(o); err != nil {
				return n, fmt.Errorf("retiring the API object of %s: %w", name, err)
			}
		}
		patch := client.MergeFrom(o.DeepCopy())
		o.SetFinalizers(keep)
		if err := c.Patch(ctx, o, patch); client.IgnoreNotFound(err) != nil {
			return n, fmt.Errorf("removing finalizers from %s: %w", name, err)
		}
		fmt.Fprintf(out, "removed finalizers from %s\n", name)
	}
	return n, nil
}

// apiClientFromCluster builds an API client from the OperatorConfig and its token
// Secret, and the configuration snapshot (the local cluster) that natural-key
// lookups of CRs without an API id need.
func apiClientFromCluster(ctx context.Context, c client.Client, namespace string) (*polycrate.Client, *liveconfig.Snapshot, error) {
	oc := &v1.OperatorConfig{}
	if err := c.Get(ctx, types.NamespacedName{Namespace: namespace, Name: v1.DefaultOperatorConfigName}, oc); err != nil {
		return nil, nil, fmt.Errorf("reading OperatorConfig %s/%s: %w", namespace, v1.DefaultOperatorConfigName, err)
	}
	snap := &liveconfig.Snapshot{Namespace: namespace, Generation: oc.Generation, Spec: oc.Spec}
	if lc := oc.Status.LocalCluster; lc != nil {
		snap.LocalClusterID = lc.ClusterID
	}
	ref := oc.Spec.APISync.CredentialsRef
	name, key := ref.SecretName, ref.TokenKey
	if name == "" {
		name = "polycrate-api-creds"
	}
	if key == "" {
		key = "token"
	}
	s := &corev1.Secret{}
	if err := c.Get(ctx, types.NamespacedName{Namespace: namespace, Name: name}, s); err != nil {
		return nil, nil, fmt.Errorf("reading the token Secret %s/%s: %w", namespace, name, err)
	}
	token := strings.TrimSpace(string(s.Data[key]))
	if token == "" {
		return nil, nil, errors.New("the token Secret " + namespace + "/" + name + " has no key " + key)
	}
	url := oc.Spec.APISync.APIURL
	if url == "" {
		url = "https://api.polycrate.io"
	}
	api, err := polycrate.New(polycrate.Options{BaseURL: url, Token: polycrate.StaticToken(token)})
	return api, snap, err
}
