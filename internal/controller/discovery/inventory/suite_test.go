package inventory_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
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

func TestInventory(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "Inventory discovery and sync (envtest + emulator)")
}

var _ = specs.OperatorSuite(testutil.OperatorEnvOptions{ThirdPartyCRDs: true, Configure: func(oc *v1.OperatorConfig) {
	oc.Spec.CertificateDiscovery.IssuerFilter.ExcludeIssuers = []string{"selfsigned-issuer"}
}}, func(e *testutil.OperatorEnv) {
	oe, k8s, api = e, e.K8s, e.API
	Expect(k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "velero"}})).To(Succeed())
})

func freshNamespace() string { return specs.Namespace(k8s, "inv") }

func apiClient() *polycrate.Client { return oe.Client() }

func localCluster() string {
	id, err := oe.Op.Config.Get().LocalCluster()
	Expect(err).NotTo(HaveOccurred())
	return id
}

func cnpgCRDs() string { return filepath.Join(testutil.RepoRoot(), "test", "crds", "cnpg") }

// syncedCR waits until the CR is synced and returns its API id.
func syncedCR(obj client.Object, status func() *v1.SyncStatus) string {
	GinkgoHelper()
	Eventually(func(g Gomega) {
		g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(obj), obj)).To(Succeed())
		g.Expect(status().Phase).To(Equal("Synced"), "message: %s", status().Message)
		g.Expect(status().APIID).NotTo(BeEmpty())
	}, timeout, poll).Should(Succeed())
	return status().APIID
}

func goneCR(obj client.Object) {
	GinkgoHelper()
	Eventually(func() bool {
		err := k8s.Get(ctx, client.ObjectKeyFromObject(obj), obj)
		return err != nil && client.IgnoreNotFound(err) == nil
	}, timeout, poll).Should(BeTrue())
}

func absentCR(obj client.Object) {
	GinkgoHelper()
	Consistently(func() error { return k8s.Get(ctx, client.ObjectKeyFromObject(obj), obj) }, 2*time.Second, 200*time.Millisecond).ShouldNot(Succeed())
}

// eventually polls an API getter until match holds.
func eventually[D any](get func() (*D, error), match func(Gomega, *D)) *D {
	GinkgoHelper()
	var out *D
	Eventually(func(g Gomega) {
		d, err := get()
		g.Expect(err).NotTo(HaveOccurred())
		match(g, d)
		out = d
	}, timeout, poll).Should(Succeed())
	return out
}

// deletedInAPI waits until the API object is gone (404) or soft-deleted.
func deletedInAPI(get func() (bool, error)) {
	GinkgoHelper()
	Eventually(func() bool {
		deleted, err := get()
		return err == nil && deleted
	}, timeout, poll).Should(BeTrue())
}

func writes(resources ...string) int {
	n := 0
	c := api.Counters()
	for _, r := range resources {
		n += c[r].Writes
	}
	return n
}

var inventoryResources = []string{"hosts", "kubernetes/volumes", "backups/backups", "backups/backup-schedules", "certificates"}

func metaItems(list client.ObjectList) ([]client.Object, error) {
	var out []client.Object
	err := apimeta.EachListItem(list, func(o runtime.Object) error {
		out = append(out, o.(client.Object))
		return nil
	})
	return out, err
}
