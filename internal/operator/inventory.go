package operator

import (
	"context"
	"fmt"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/polycrate/polycrate-operator/internal/controller/discovery/inventory"
	"github.com/polycrate/polycrate-operator/internal/liveconfig"
)

// setupInventory wires the inventory mirrors (discovery; their API syncs are registered kinds).
func setupInventory(mgr ctrl.Manager, op *Operator, o Options) error {
	op.Inventory = map[string]interface {
		All(context.Context, client.Client)
	}{}
	log := mgr.GetLogger().WithName("inventory")
	var nodes func(*liveconfig.Snapshot) int32 // node_discovery has no interval of its own: every 10 minutes
	backups := func(s *liveconfig.Snapshot) int32 { return s.Spec.BackupDiscovery.StaleCleanupMinutes }
	certs := func(s *liveconfig.Snapshot) int32 { return s.Spec.CertificateDiscovery.StaleCleanupMinutes }
	hosts := &inventory.HostMirror{OnError: func(msg string) { log.Info(msg) }}

	if err := mirror(mgr, op, o, hosts, "", nodes); err != nil {
		return err
	}
	if err := mirror(mgr, op, o, inventory.VolumeMirror{}, "", nodes); err != nil {
		return err
	}
	if err := mirror(mgr, op, o, inventory.VeleroBackupMirror{}, inventory.CRDVeleroBackup, backups); err != nil {
		return err
	}
	if err := mirror(mgr, op, o, inventory.VeleroScheduleMirror{}, inventory.CRDVeleroSchedule, backups); err != nil {
		return err
	}
	if err := mirror(mgr, op, o, inventory.CNPGBackupMirror{}, inventory.CRDCNPGBackup, backups); err != nil {
		return err
	}
	if err := mirror(mgr, op, o, inventory.CNPGScheduledMirror{}, inventory.CRDCNPGScheduled, backups); err != nil {
		return err
	}
	if err := mirror(mgr, op, o, inventory.CertificateMirror{}, inventory.CRDCertificate, certs); err != nil {
		return err
	}

	return nil
}

func mirror[S client.Object](mgr ctrl.Manager, op *Operator, o Options, m inventory.Mirror[S], crd string, stale func(*liveconfig.Snapshot) int32) error {
	r := &inventory.Reconciler[S]{Client: mgr.GetClient(), Config: op.Config, Recorder: mgr.GetEventRecorder("polycrate-operator"),
		Log: mgr.GetLogger().WithName("inventory"), Mirror: m}
	if crd != "" {
		r.Gate, r.CRD = op.Gate, crd
	}
	if err := inventory.Setup(mgr, r, o.MaxConcurrentReconciles, stale); err != nil {
		return fmt.Errorf("setting up %s discovery: %w", m.Name(), err)
	}
	op.Inventory[m.Name()] = r
	return nil
}
