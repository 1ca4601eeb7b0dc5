package operatorconfig

import (
	"context"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/polycrate/polycrate-operator/api/v1alpha1"
	"github.com/polycrate/polycrate-operator/internal/liveconfig"
	"github.com/polycrate/polycrate-operator/internal/polycrate"
)

// ReplicaInterval is how often a Replica reads the OperatorConfig and its token
// Secret from its caches.
const ReplicaInterval = 5 * time.Second

// Replica is one replica's own view of the configuration, for the servers that
// run on every replica behind a Service (the DNS webhooks): it keeps a
// configuration store and an API connection of its own in step with the
// OperatorConfig and its token Secret, read from the caches. It runs on every
// replica, the leader included, and writes nothing: the leader's reconciler
// owns the status, the API registration and the controllers' configuration,
// which this view never touches (a replica about to be elected must not hand
// the controllers a configuration without the local cluster).
type Replica struct {
	// Reader is the manager's cache (the OperatorConfig); Secrets the operator
	// namespace's Secret cache.
	Reader, Secrets client.Reader
	// Config and Conn are this view's own.
	Config    *liveconfig.Store
	Conn      *polycrate.Connection
	Namespace string
	Log       logr.Logger
}

// NeedLeaderElection: every replica.
func (r *Replica) NeedLeaderElection() bool { return false }

// Start follows until ctx ends.
func (r *Replica) Start(ctx context.Context) error {
	tick := time.NewTicker(ReplicaInterval)
	defer tick.Stop()
	for {
		r.follow(ctx)
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

// follow publishes a new OperatorConfig generation and connects with its token
// (a missing OperatorConfig withdraws the configuration).
func (r *Replica) follow(ctx context.Context) {
	oc := &v1.OperatorConfig{}
	if err := r.Reader.Get(ctx, types.NamespacedName{Namespace: r.Namespace, Name: v1.DefaultOperatorConfigName}, oc); err != nil {
		if client.IgnoreNotFound(err) == nil && r.Config.Get() != nil {
			r.Config.Set(nil)
			r.Conn.Disconnect()
		}
		return
	}
	if cur := r.Config.Get(); cur == nil || cur.Generation != oc.Generation {
		r.Config.Set(&liveconfig.Snapshot{Namespace: oc.Namespace, Generation: oc.Generation, Spec: *oc.Spec.DeepCopy()})
	}
	spec := oc.Spec.APISync
	if !liveconfig.Enabled(spec.Enabled) {
		r.Conn.Disconnect()
		return
	}
	token, reason, msg := readToken(ctx, r.Secrets, r.Namespace, spec.CredentialsRef)
	if reason != "" {
		r.Conn.Disconnect()
		r.Log.V(1).Info("no API connection for the servers of this replica", "reason", reason, "message", msg)
		return
	}
	if changed, err := r.Conn.Configure(spec.APIURL, spec.CACertificate, token); err != nil {
		r.Conn.Disconnect()
	} else if changed {
		r.Log.Info("the servers of this replica are connected to the Polycrate API", "url", spec.APIURL)
	}
}
