package operator

import (
	"context"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/polycrate/polycrate-operator/internal/controller"
	"github.com/polycrate/polycrate-operator/internal/controller/crdgate"
	"github.com/polycrate/polycrate-operator/internal/controller/discovery/inventory"
	"github.com/polycrate/polycrate-operator/internal/liveconfig"
)

// InventoryMirror is one inventory mirror's reconciler.
type InventoryMirror interface {
	SetupWithManager(manager.Manager) error
	// All runs a full pass (what a configuration change and the stale sweep do).
	All(context.Context, client.Client)
}

// inventoryMirrors are the inventory's discovery reconcilers, by mirror name;
// their API syncs are registered kinds (apisync.Kinds).
func inventoryMirrors(d controller.Deps, gate *crdgate.Gate) map[string]InventoryMirror {
	// node_discovery has no interval of its own: DefaultSweepInterval.
	backups := func(s *liveconfig.Snapshot) int32 { return s.Spec.BackupDiscovery.StaleCleanupMinutes }
	certs := func(s *liveconfig.Snapshot) int32 { return s.Spec.CertificateDiscovery.StaleCleanupMinutes }
	out := map[string]InventoryMirror{}
	add := func(name string, m InventoryMirror) { out[name] = m }
	add(mirror(d, nil, &inventory.HostMirror{OnError: func(msg string) { d.Log.Info(msg) }}, "", nil))
	add(mirror(d, nil, inventory.VolumeMirror{}, "", nil))
	add(mirror(d, gate, inventory.VeleroBackupMirror{}, inventory.CRDVeleroBackup, backups))
	add(mirror(d, gate, inventory.VeleroScheduleMirror{}, inventory.CRDVeleroSchedule, backups))
	add(mirror(d, gate, inventory.CNPGBackupMirror{}, inventory.CRDCNPGBackup, backups))
	add(mirror(d, gate, inventory.CNPGScheduledMirror{}, inventory.CRDCNPGScheduled, backups))
	add(mirror(d, gate, inventory.CertificateMirror{}, inventory.CRDCertificate, certs))
	return out
}

func mirror[S client.Object](d controller.Deps, gate *crdgate.Gate, m inventory.Mirror[S], crd string,
	stale func(*liveconfig.Snapshot) int32) (string, InventoryMirror) {
	r := &inventory.Reconciler[S]{Deps: d, Mirror: m, StaleMinutes: stale}
	if crd != "" {
		r.Gate, r.CRD = gate, crd
	}
	return m.Name(), r
}
