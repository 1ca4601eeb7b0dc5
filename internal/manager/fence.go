package manager

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/util/uuid"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection/resourcelock"

	"github.com/polycrate/polycrate-operator/internal/polycrate"
)

// Fence says whether this replica may act as the leader right now: leader
// election alone does not stop a leader that was paused (SIGSTOP, a frozen VM,
// a long stall) from finishing, after it resumes, the write it had begun — while
// a standby took over and made the same write: a duplicate in the API. The
// fence holds the start of the last successful acquisition or renewal of the
// Lease; the leader may talk to the Polycrate API only while that is less than
// the renew deadline ago (by the monotonic clock, which runs on while the
// process is stopped). A standby can take over no earlier than the lease
// duration after that renewal, which is longer. The operator's API client checks
// the fence right before each write to the network (polycrate.Options.Fence),
// so a resumed leader's first bytes are refused. Safe for concurrent use.
type Fence struct {
	mu      sync.Mutex
	enabled bool
	valid   time.Duration
	last    time.Time
}

// Check is nil while the leadership is confirmed (always without leader
// election), else an error wrapping polycrate.ErrFenced.
func (f *Fence) Check() error {
	if f == nil {
		return nil
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	switch {
	case !f.enabled:
		return nil
	case f.last.IsZero():
		return fmt.Errorf("%w: it has not acquired the leader Lease", polycrate.ErrFenced)
	case time.Since(f.last) >= f.valid:
		return fmt.Errorf("%w: its last Lease renewal began %s ago, more than the renew deadline %s (paused or cut off; a standby may lead now)",
			polycrate.ErrFenced, time.Since(f.last).Round(time.Millisecond), f.valid)
	}
	return nil
}

func (f *Fence) renewed(start time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if start.After(f.last) {
		f.last = start
	}
}

// fencedLock is the Lease lock that tells the fence of each successful write.
type fencedLock struct {
	resourcelock.Interface
	f *Fence
}

func (l fencedLock) Create(ctx context.Context, ler resourcelock.LeaderElectionRecord) error {
	start := time.Now()
	err := l.Interface.Create(ctx, ler)
	if err == nil && ler.HolderIdentity == l.Identity() {
		l.f.renewed(start)
	}
	return err
}

func (l fencedLock) Update(ctx context.Context, ler resourcelock.LeaderElectionRecord) error {
	start := time.Now()
	err := l.Interface.Update(ctx, ler)
	if err == nil && ler.HolderIdentity == l.Identity() {
		l.f.renewed(start)
	}
	return err
}

// leaseLock builds the Lease lock controller-runtime would (its clients time out
// after half the renew deadline), wired to the fence.
func leaseLock(cfg *rest.Config, namespace, name string, renewDeadline time.Duration, f *Fence) (resourcelock.Interface, error) {
	host, err := os.Hostname()
	if err != nil {
		return nil, err
	}
	id := host + "_" + string(uuid.NewUUID())
	cfg = rest.AddUserAgent(rest.CopyConfig(cfg), "leader-election")
	cfg.Timeout = max(renewDeadline/2, time.Second)
	core, err := corev1client.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	coord, err := coordinationv1client.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	lock, err := resourcelock.New(resourcelock.LeasesResourceLock, namespace, name, core, coord, resourcelock.ResourceLockConfig{Identity: id})
	if err != nil {
		return nil, err
	}
	f.mu.Lock()
	f.enabled, f.valid = true, renewDeadline
	f.mu.Unlock()
	return fencedLock{Interface: lock, f: f}, nil
}

// fencedRoundTripper refuses the Kubernetes writes (anything but GET, HEAD and
// watch) of a replica whose leadership is not confirmed, like the API client's
// fence: a leader resumed after a takeover must not create, patch or delete what
// its successor now owns (an Endpoint for a source deleted meanwhile, a
// finalizer). Reads pass: every replica keeps its caches warm.
type fencedRoundTripper struct {
	rt    http.RoundTripper
	fence *Fence
}

func (f fencedRoundTripper) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method != http.MethodGet && req.Method != http.MethodHead {
		if err := f.fence.Check(); err != nil {
			return nil, fmt.Errorf("Kubernetes %s %s refused: %w", req.Method, req.URL.Path, err)
		}
	}
	return f.rt.RoundTrip(req)
}

// fenceWrites returns a copy of cfg whose writes go through the fence.
func fenceWrites(cfg *rest.Config, f *Fence) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return fencedRoundTripper{rt: rt, fence: f} })
	return cfg
}
