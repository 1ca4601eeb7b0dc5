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

// FollowInterval is how often a follower reads the OperatorConfig and its token
// Secret from its caches.
const FollowInterval = 5 * time.Second

// Follower configures a replica that is not (yet) the leader: the live
// configuration and the API connection follow the OperatorConfig and its token
// Secret, so that the servers every replica runs (the DNS webhooks behind their
// Services) work on every replica. It writes nothing — the leader's reconciler
// owns the status and the API registration — and stops once this replica is
// elected: from then on the reconciler publishes.
type Follower struct {
	// Reader is the manager's cache (the OperatorConfig); Secrets the operator
	// namespace's Secret cache.
	Reader, Secrets client.Reader
	Config          *liveconfig.Store
	Conn            *polycrate.Connection
	Namespace       string
	// Elected closes when this replica becomes the leader.
	Elected <-chan struct{}
	Log     logr.Logger
}

// NeedLeaderElection: a follower runs where the reconciler does not.
func (f *Follower) NeedLeaderElection() bool { return false }

// Start follows until this replica is elected or ctx ends.
func (f *Follower) Start(ctx context.Context) error {
	tick := time.NewTicker(FollowInterval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-f.Elected:
			return nil
		default:
		}
		f.follow(ctx)
		select {
		case <-ctx.Done():
			return nil
		case <-f.Elected:
			return nil
		case <-tick.C:
		}
	}
}

// follow publishes a newer OperatorConfig generation (never over the leader
// reconciler's snapshot of the same generation, which knows more) and connects
// with its token.
func (f *Follower) follow(ctx context.Context) {
	oc := &v1.OperatorConfig{}
	if err := f.Reader.Get(ctx, types.NamespacedName{Namespace: f.Namespace, Name: v1.DefaultOperatorConfigName}, oc); err != nil {
		return
	}
	if cur := f.Config.Get(); cur == nil || cur.Generation != oc.Generation {
		f.Config.Set(&liveconfig.Snapshot{Namespace: oc.Namespace, Generation: oc.Generation, Spec: *oc.Spec.DeepCopy()})
	}
	spec := oc.Spec.APISync
	if !liveconfig.Enabled(spec.Enabled) {
		f.Conn.Disconnect()
		return
	}
	token, reason, msg := readToken(ctx, f.Secrets, f.Namespace, spec.CredentialsRef)
	if reason != "" {
		f.Conn.Disconnect()
		f.Log.V(1).Info("follower not connected", "reason", reason, "message", msg)
		return
	}
	if changed, err := f.Conn.Configure(spec.APIURL, spec.CACertificate, token); err != nil {
		f.Conn.Disconnect()
	} else if changed {
		f.Log.Info("follower connected to the Polycrate API (for the servers every replica runs)", "url", spec.APIURL)
	}
}
