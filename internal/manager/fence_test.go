package manager

import (
	"context"
	"errors"
	"testing"
	"time"

	"k8s.io/client-go/tools/leaderelection/resourcelock"

	"github.com/polycrate/polycrate-operator/internal/polycrate"
)

// fakeLock is a Lease lock whose writes succeed or fail as told.
type fakeLock struct {
	resourcelock.Interface
	fail error
}

func (l *fakeLock) Identity() string { return "me" }
func (l *fakeLock) Create(context.Context, resourcelock.LeaderElectionRecord) error {
	return l.fail
}
func (l *fakeLock) Update(context.Context, resourcelock.LeaderElectionRecord) error {
	return l.fail
}

func TestFence(t *testing.T) {
	var none *Fence
	if none.Check() != nil || (&Fence{}).Check() != nil {
		t.Fatal("without leader election nothing is fenced")
	}
	f := &Fence{enabled: true, valid: 200 * time.Millisecond}
	if err := f.Check(); !errors.Is(err, polycrate.ErrFenced) {
		t.Fatalf("before the first acquisition: %v", err)
	}
	inner := &fakeLock{}
	lock := fencedLock{Interface: inner, f: f}
	ctx := context.Background()
	if err := lock.Create(ctx, resourcelock.LeaderElectionRecord{HolderIdentity: "me"}); err != nil {
		t.Fatal(err)
	}
	if err := f.Check(); err != nil {
		t.Fatalf("after acquiring: %v", err)
	}
	// Paused past the renew deadline: fenced, until a renewal succeeds.
	time.Sleep(250 * time.Millisecond)
	if err := f.Check(); !errors.Is(err, polycrate.ErrFenced) {
		t.Fatalf("after the deadline: %v", err)
	}
	inner.fail = errors.New("the Lease is held by another")
	_ = lock.Update(ctx, resourcelock.LeaderElectionRecord{HolderIdentity: "me"})
	if err := f.Check(); err == nil {
		t.Fatal("a failed renewal lifted the fence")
	}
	inner.fail = nil
	_ = lock.Update(ctx, resourcelock.LeaderElectionRecord{HolderIdentity: ""}) // the release on shutdown
	if err := f.Check(); err == nil {
		t.Fatal("releasing the Lease lifted the fence")
	}
	if err := lock.Update(ctx, resourcelock.LeaderElectionRecord{HolderIdentity: "me"}); err != nil || f.Check() != nil {
		t.Fatalf("a renewal must lift the fence: %v", f.Check())
	}
}
