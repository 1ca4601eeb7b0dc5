package operatorconfig

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/polycrate/polycrate-operator/api/v1alpha1"
	"github.com/polycrate/polycrate-operator/internal/controller"
	"github.com/polycrate/polycrate-operator/internal/liveconfig"
)

// A reconcile that reads a cached status older than this process's own
// registration (its status write lost a conflict) must not withdraw the local
// cluster from the snapshot: every synced object would flip to "waiting for the
// local cluster" and back. A status that names a cluster always wins.
func TestPublishKeepsTheRegisteredClusterWhileTheStatusLags(t *testing.T) {
	store := &liveconfig.Store{}
	r := &Reconciler{Deps: controller.Deps{Config: store}}
	oc := &v1.OperatorConfig{ObjectMeta: metav1.ObjectMeta{Namespace: "polycrate", Name: "default", Generation: 1}}
	oc.Status.LocalCluster = &v1.LocalClusterStatus{ClusterID: "c-1"}
	r.publish(oc, nil)
	r.lastLocal = oc.Status.LocalCluster.DeepCopy()

	changes := store.Subscribe()
	stale := oc.DeepCopy()
	stale.Status.LocalCluster = nil
	r.publish(stale, nil)
	if got := store.Get().LocalClusterID; got != "c-1" {
		t.Fatalf("LocalClusterID = %q after a lagging status, want c-1", got)
	}
	select {
	case <-changes:
		t.Fatal("a lagging status notified the subscribers")
	default:
	}

	moved := oc.DeepCopy()
	moved.Status.LocalCluster = &v1.LocalClusterStatus{ClusterID: "c-2"}
	r.publish(moved, nil)
	if got := store.Get().LocalClusterID; got != "c-2" {
		t.Fatalf("LocalClusterID = %q, want the status's c-2", got)
	}

	r.lastLocal = nil // this process no longer vouches for a cluster
	r.publish(stale, nil)
	if got := store.Get().LocalClusterID; got != "" {
		t.Fatalf("LocalClusterID = %q without status or registration, want none", got)
	}
}
