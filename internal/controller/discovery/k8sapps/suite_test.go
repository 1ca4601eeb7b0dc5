package k8sapps_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/polycrate/polycrate-operator/api/v1alpha1"
	"github.com/polycrate/polycrate-operator/internal/emulator"
	"github.com/polycrate/polycrate-operator/internal/polycrate"
	"github.com/polycrate/polycrate-operator/internal/testutil"
	"github.com/polycrate/polycrate-operator/internal/testutil/specs"
)

const (
	timeout = 30 * time.Second
	poll    = 100 * time.Millisecond
)

var (
	oe  *testutil.OperatorEnv
	k8s client.Client
	api *emulator.Server
	ctx = context.Background()
)

func TestK8sApps(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "K8sApp discovery and sync (envtest + emulator)")
}

var _ = specs.OperatorSuite(testutil.OperatorEnvOptions{ThirdPartyCRDs: true, Configure: func(oc *v1.OperatorConfig) {
	oc.Spec.AppDiscovery.IgnoreNamespaces = []string{"kube-system", "apps-ignored"}
}}, func(e *testutil.OperatorEnv) {
	oe, k8s, api = e, e.K8s, e.API
	Expect(k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "apps-ignored"}})).To(Succeed())
})

func freshNamespace() string { return specs.Namespace(k8s, "apps") }

func apiClient() *polycrate.Client { return oe.Client() }

func localCluster() string {
	id, err := oe.Op.Config.Get().LocalCluster()
	Expect(err).NotTo(HaveOccurred())
	return id
}

// metaDoc is a meta-Secret document (docs/k8sapps.md) for a block.
func metaDoc(block, kind, workspace, action, status string) string {
	return fmt.Sprintf(`block:
  name: %s
  display_name: %s display
  kind: %s
  version: 1.2.0
  app_version: 1.9.6
  from: cargo.ayedo.cloud/ayedo/k8s/%s
  type: ingress-controller
  flavor: nginx
  chart:
    name: ingress-nginx
    version: 4.9.0
    repo_url: https://kubernetes.github.io/ingress-nginx
workspace:
  name: %s
  organization: acme-corp
action:
  name: %s
  status: %s
  last_executed_at: "2025-12-20T10:00:00Z"
`, block, block, kind, block, workspace, action, status)
}

func metaSecret(ns, block, doc string) *corev1.Secret {
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: block + ".poly"}, StringData: map[string]string{"block.poly": doc}}
}

// app waits until the K8sApp exists and matches.
func app(ns, name string, match func(Gomega, *v1.K8sApp)) *v1.K8sApp {
	GinkgoHelper()
	a := &v1.K8sApp{}
	Eventually(func(g Gomega) {
		g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, a)).To(Succeed())
		if match != nil {
			match(g, a)
		}
	}, timeout, poll).Should(Succeed())
	return a
}

// synced waits until the K8sApp is synced and returns its API object.
func synced(ns, name string) (*v1.K8sApp, *polycrate.K8sApp) {
	GinkgoHelper()
	a := app(ns, name, func(g Gomega, a *v1.K8sApp) {
		g.Expect(a.Status.Phase).To(Equal("Synced"), "message: %s", a.Status.Message)
		g.Expect(a.Status.APIID).NotTo(BeEmpty())
	})
	remote, err := apiClient().K8sApps().Get(ctx, a.Status.APIID)
	Expect(err).NotTo(HaveOccurred())
	return a, remote
}

// apiApp waits until the API app matches.
func apiApp(id string, match func(Gomega, *polycrate.K8sApp)) *polycrate.K8sApp {
	GinkgoHelper()
	var out *polycrate.K8sApp
	Eventually(func(g Gomega) {
		a, err := apiClient().K8sApps().Get(ctx, id)
		g.Expect(err).NotTo(HaveOccurred())
		match(g, a)
		out = a
	}, timeout, poll).Should(Succeed())
	return out
}

func gone(ns, name string) {
	GinkgoHelper()
	Eventually(func() bool {
		err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &v1.K8sApp{})
		return client.IgnoreNotFound(err) == nil && err != nil
	}, timeout, poll).Should(BeTrue())
}

func absent(ns, name string) {
	GinkgoHelper()
	Consistently(func() error {
		return k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &v1.K8sApp{})
	}, 2*time.Second, 200*time.Millisecond).ShouldNot(Succeed())
}

// workload creates a Deployment and its ReplicaSet (nothing runs them in envtest)
// and returns the ReplicaSet to own Pods.
func workload(ns, name string) *appsv1.ReplicaSet {
	GinkgoHelper()
	labels := map[string]string{"app": name}
	tmpl := corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "nginx:1.25.3"}}}}
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{MatchLabels: labels}, Template: tmpl}}
	Expect(k8s.Create(ctx, d)).To(Succeed())
	rs := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name + "-5d8f7c9b4",
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "Deployment", Name: d.Name, UID: d.UID, Controller: ptr.To(true)}}},
		Spec: appsv1.ReplicaSetSpec{Selector: &metav1.LabelSelector{MatchLabels: labels}, Template: tmpl}}
	Expect(k8s.Create(ctx, rs)).To(Succeed())
	return rs
}

type podOpts struct {
	app      string
	owner    metav1.OwnerReference
	images   []string
	ready    bool
	restarts int32
}

func rsOwner(rs *appsv1.ReplicaSet) metav1.OwnerReference {
	return metav1.OwnerReference{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: rs.Name, UID: rs.UID, Controller: ptr.To(true)}
}

func jobOwner(name string) metav1.OwnerReference {
	return metav1.OwnerReference{APIVersion: "batch/v1", Kind: "Job", Name: name, UID: "6f3a2c1e-0000-4000-8000-000000000001", Controller: ptr.To(true)}
}

// pod creates a Pod and sets its status as a kubelet would.
func pod(ns, name string, o podOpts) *corev1.Pod {
	GinkgoHelper()
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, OwnerReferences: []metav1.OwnerReference{o.owner},
		Labels: map[string]string{"pod-template-hash": "5d8f7c9b4"}}}
	if o.owner.Kind != "ReplicaSet" {
		p.Labels = nil
	}
	if o.app != "" {
		p.Annotations = map[string]string{"polycrate_k8sapp_name": o.app}
	}
	if len(o.images) == 0 {
		o.images = []string{"nginx:1.25.3"}
	}
	for i, img := range o.images {
		p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: fmt.Sprintf("c%d", i), Image: img})
	}
	Expect(k8s.Create(ctx, p)).To(Succeed())
	setPodStatus(p, o.ready, o.restarts)
	return p
}

func setPodStatus(p *corev1.Pod, ready bool, restarts int32) {
	GinkgoHelper()
	Eventually(func() error {
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(p), p); err != nil {
			return err
		}
		cond := corev1.ConditionFalse
		if ready {
			cond = corev1.ConditionTrue
		}
		p.Status.Phase = corev1.PodRunning
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: cond}}
		p.Status.ContainerStatuses = nil
		for _, c := range p.Spec.Containers {
			p.Status.ContainerStatuses = append(p.Status.ContainerStatuses, corev1.ContainerStatus{Name: c.Name, Image: c.Image, Ready: ready, RestartCount: restarts})
		}
		return k8s.Status().Update(ctx, p)
	}, timeout, poll).Should(Succeed())
}

// events lists the Warning events about an object with a reason.
func warnings(ns, kind, name, reason string) func() []string {
	return func() []string {
		list := &eventsv1.EventList{}
		if err := k8s.List(ctx, list, client.InNamespace(ns)); err != nil {
			return nil
		}
		var out []string
		for _, e := range list.Items {
			if e.Type == corev1.EventTypeWarning && e.Regarding.Kind == kind && e.Regarding.Name == name && e.Reason == reason {
				out = append(out, e.Note)
			}
		}
		return out
	}
}

func appWrites() int { return api.Counters()["kubernetes/apps"].Writes }
