// Package k8scluster reconciles K8sCluster CRs: external clusters the operator
// connects to with a ServiceAccount token or a kubeconfig from a Secret. It reads
// each cluster's server version and reports Pending, Ready or Error with the reason.
package k8scluster

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	v1 "github.com/polycrate/polycrate-operator/api/v1alpha1"
	"github.com/polycrate/polycrate-operator/internal/controller"
)

// Phases of a K8sCluster.
const (
	PhasePending = "Pending"
	PhaseReady   = "Ready"
	PhaseError   = "Error"
)

// Rechecks: a reachable cluster every controller.RequeueResync, a failing one
// every controller.RequeueFailedStep (a fixed wait, not a retry storm).
const dialTimeout = 10 * time.Second

// Reconciler reconciles K8sCluster objects.
type Reconciler struct {
	controller.Deps
	// Secrets reads Secrets of the operator namespace only; SecretSource watches
	// them (mapped with SecretHandler).
	Secrets      client.Reader
	SecretSource source.SyncingSource
	Namespace    string
}

// Reconcile connects to the cluster and records what it found.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	kc := &v1.K8sCluster{}
	if err := r.Client.Get(ctx, req.NamespacedName, kc); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	// No finalizer: nothing outside the CR belongs to it (it is never reported to
	// the API, see below).
	patcher := r.StatusPatcher(kc)
	if kc.Status.Phase == "" {
		kc.Status.Phase = PhasePending
	}
	result := r.check(ctx, kc)
	// Reporting to the API: the contract keeps one cluster per workspace, and the
	// workspace's record is the local cluster (OperatorConfig status.local_cluster);
	// an external cluster is never created there nor adopted on a 409.
	r.events().Condition(kc, metav1.Condition{Type: v1.ConditionAPIReported, Status: metav1.ConditionFalse, Reason: v1.ReasonOneClusterPerWorkspace,
		Message: "not reported to the Polycrate API: it keeps one cluster per workspace, and that record is the local cluster's"}, false)
	_, err := patcher.Done(ctx, kc, kc.Status.Phase == PhaseReady)
	return result, err
}

func (r *Reconciler) check(ctx context.Context, kc *v1.K8sCluster) ctrl.Result {
	if kc.Namespace != r.Namespace {
		r.fail(kc, v1.ReasonInvalidSpec, fmt.Sprintf("K8sClusters are read in the operator namespace %q only (their credential Secrets are read there)", r.Namespace))
		return ctrl.Result{} // nothing will change until the object is recreated there
	}
	cfg, reason, msg := r.restConfig(ctx, kc)
	if reason != "" {
		r.fail(kc, reason, msg)
		return ctrl.Result{RequeueAfter: controller.RequeueFailedStep}
	}
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		r.fail(kc, v1.ReasonInvalidSpec, err.Error())
		return ctrl.Result{RequeueAfter: controller.RequeueFailedStep}
	}
	v, err := dc.ServerVersion()
	if err != nil {
		o := controller.Classify(controller.Remote("the cluster", "spec.caCertificate", err))
		r.fail(kc, o.Reason, scrub(o.Message))
		return ctrl.Result{RequeueAfter: controller.RequeueFailedStep}
	}
	kc.Status.Phase = PhaseReady
	kc.Status.ServerVersion = v.GitVersion
	kc.Status.Message = ""
	r.events().Ready(kc, metav1.ConditionTrue, v1.ReasonConnected, "server version "+v.GitVersion, true) // "connected again" after a failure
	return ctrl.Result{RequeueAfter: controller.RequeueResync}
}

func (r *Reconciler) fail(kc *v1.K8sCluster, reason, msg string) {
	kc.Status.Phase = PhaseError
	kc.Status.Message = msg
	r.events().Ready(kc, metav1.ConditionFalse, reason, msg, true)
}

func (r *Reconciler) events() controller.Events { return r.Events("Connect") }

// restConfig builds the client configuration from the Secret; a non-empty reason
// says why it cannot. Messages never contain credentials.
func (r *Reconciler) restConfig(ctx context.Context, kc *v1.K8sCluster) (*rest.Config, string, string) {
	auth := kc.Spec.Authentication
	ref := auth.ServiceAccountToken
	if ref == nil {
		ref = auth.Kubeconfig
	}
	if ref == nil {
		return nil, v1.ReasonInvalidSpec, "spec.authentication names neither serviceAccountToken nor kubeconfig"
	}
	s := &corev1.Secret{}
	if err := r.Secrets.Get(ctx, types.NamespacedName{Namespace: kc.Namespace, Name: ref.SecretRef.Name}, s); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, v1.ReasonSecretNotFound, fmt.Sprintf("Secret %s/%s does not exist", kc.Namespace, ref.SecretRef.Name)
		}
		return nil, v1.ReasonSecretNotFound, fmt.Sprintf("cannot read Secret %s/%s: %v", kc.Namespace, ref.SecretRef.Name, err)
	}
	data, ok := s.Data[ref.SecretRef.Key]
	if !ok || len(strings.TrimSpace(string(data))) == 0 {
		return nil, v1.ReasonSecretKeyMissing, fmt.Sprintf("Secret %s/%s has no (non-empty) key %q", kc.Namespace, ref.SecretRef.Name, ref.SecretRef.Key)
	}
	var cfg *rest.Config
	if auth.ServiceAccountToken != nil {
		cfg = &rest.Config{Host: kc.Spec.APIServer, BearerToken: strings.TrimSpace(string(data))}
	} else {
		c, err := clientcmd.RESTConfigFromKubeConfig(data)
		if err != nil {
			return nil, v1.ReasonInvalidSpec, fmt.Sprintf("the kubeconfig in Secret %s/%s is invalid: %s", kc.Namespace, ref.SecretRef.Name, scrub(err.Error()))
		}
		cfg = c
		if kc.Spec.APIServer != "" {
			cfg.Host = kc.Spec.APIServer
		}
	}
	if ca := strings.TrimSpace(kc.Spec.CACertificate); ca != "" {
		if reason, msg := checkCA([]byte(ca)); reason != "" {
			return nil, reason, msg
		}
		cfg.CAData = []byte(ca)
		cfg.CAFile = ""
		cfg.Insecure = false
	}
	cfg.Timeout = dialTimeout
	cfg.UserAgent = "polycrate-operator"
	return cfg, "", ""
}

// checkCA accepts only PEM certificates.
func checkCA(pemData []byte) (string, string) {
	block, _ := pem.Decode(pemData)
	if block == nil || block.Type != "CERTIFICATE" {
		return v1.ReasonInvalidCACertificate, "spec.caCertificate is not a PEM certificate"
	}
	if _, err := x509.ParseCertificate(block.Bytes); err != nil {
		return v1.ReasonInvalidCACertificate, "spec.caCertificate cannot be parsed: " + err.Error()
	}
	return "", ""
}

// scrub drops anything after a bearer token could appear.
func scrub(s string) string {
	if i := strings.Index(strings.ToLower(s), "bearer"); i >= 0 {
		s = s[:i] + "[redacted]"
	}
	return s
}

// SetupWithManager watches K8sClusters and the Secrets of the operator namespace they use.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named("k8scluster").
		For(&v1.K8sCluster{}).
		WatchesRawSource(r.SecretSource).
		WithOptions(r.Options()).
		Complete(r)
}

// SecretHandler maps a Secret of the operator namespace to the K8sClusters that use it.
func SecretHandler(c client.Client) handler.TypedEventHandler[*corev1.Secret, reconcile.Request] {
	return handler.TypedEnqueueRequestsFromMapFunc(func(ctx context.Context, s *corev1.Secret) []reconcile.Request {
		list := &v1.K8sClusterList{}
		if err := c.List(ctx, list, client.InNamespace(s.Namespace)); err != nil {
			return nil
		}
		var out []reconcile.Request
		for _, kc := range list.Items {
			a := kc.Spec.Authentication
			if (a.ServiceAccountToken != nil && a.ServiceAccountToken.SecretRef.Name == s.Name) ||
				(a.Kubeconfig != nil && a.Kubeconfig.SecretRef.Name == s.Name) {
				out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&kc)})
			}
		}
		return out
	})
}
