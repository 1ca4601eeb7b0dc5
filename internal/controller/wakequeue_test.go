package controller

import (
	"context"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/polycrate/polycrate-operator/internal/kube"
)

// TestWakingQueueRetriesOnTheAPIServersReturn: an item backing off after a
// failure (5 s by the operator's limiter) is ready within moments of the
// Kubernetes API server's return; its back-off goes on if it fails again; an
// item that succeeded since is not woken.
func TestWakingQueueRetriesOnTheAPIServersReturn(t *testing.T) {
	back := kube.NewRecovery()
	q := newWakingQueue(back)("test", NewRateLimiter()).(*wakingQueue)
	defer q.ShutDown()
	item := reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "a"}}
	ok := reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "b"}}

	// What controller-runtime does after a failed reconcile.
	fail := func(r reconcile.Request) {
		q.AddWithOpts(priorityqueue.AddOpts{RateLimited: true}, r)
	}
	ready := func(within time.Duration) []reconcile.Request {
		t.Helper()
		// Ready items, or none within the wait (a timeout is the answer "none").
		_ = wait.PollUntilContextTimeout(context.Background(), 10*time.Millisecond, within, true, func(context.Context) (bool, error) {
			return q.Len() > 0, nil
		})
		var out []reconcile.Request
		for q.Len() > 0 {
			r, _, _ := q.GetWithPriority()
			q.Done(r)
			out = append(out, r)
		}
		return out
	}

	fail(item)
	fail(ok)
	q.Forget(ok) // it succeeded since (controller-runtime forgets it)
	if got := ready(200 * time.Millisecond); len(got) != 0 {
		t.Fatalf("ready before its back-off ended: %v", got)
	}
	if n := q.backingOff(); n != 1 {
		t.Fatalf("%d items backing off, want 1", n)
	}
	back.Back()
	got := ready(2 * time.Second)
	if len(got) != 1 || got[0] != item {
		t.Fatalf("after the server's return the queue handed out %v, want only %v", got, item)
	}
	// It fails again: the back-off goes on (no reset by the wake). The queue
	// takes adds through a buffer: the limiter counts it moments later.
	fail(item)
	_ = wait.PollUntilContextTimeout(context.Background(), 10*time.Millisecond, 2*time.Second, true, func(context.Context) (bool, error) {
		return q.NumRequeues(item) >= 2, nil
	})
	if n := q.NumRequeues(item); n != 2 {
		t.Fatalf("NumRequeues %d after two failures, want 2", n)
	}
	// It succeeds: the next return does not wake it (its second failure's
	// 10 s back-off is all that is left of it).
	q.Forget(item)
	back.Back()
	if got := ready(300 * time.Millisecond); len(got) != 0 {
		t.Fatalf("an item that succeeded since was woken: %v", got)
	}
}

// TestDepsOptionsWakeOnlyWithARecovery: the plain queue without a Recovery.
func TestDepsOptionsWakeOnlyWithARecovery(t *testing.T) {
	if (Deps{}).Options().NewQueue != nil {
		t.Fatal("a custom queue without a Recovery")
	}
	if (Deps{KubeBack: kube.NewRecovery()}).Options().NewQueue == nil {
		t.Fatal("no waking queue with a Recovery")
	}
}
