package controller

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

func TestRateLimiterPolicy(t *testing.T) {
	rl := NewRateLimiter()
	a := reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "a"}}
	b := reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "b"}}

	want := []time.Duration{5 * time.Second, 10 * time.Second, 20 * time.Second, 40 * time.Second, 60 * time.Second, 60 * time.Second, 60 * time.Second}
	for i, w := range want {
		if got := rl.When(a); got != w {
			t.Fatalf("failure %d of a: delay %s, want %s", i+1, got, w)
		}
	}
	if got := rl.NumRequeues(a); got != len(want) {
		t.Fatalf("NumRequeues(a) = %d, want %d", got, len(want))
	}
	// Items back off independently.
	if got := rl.When(b); got != BaseDelay {
		t.Fatalf("first failure of b: delay %s, want %s", got, BaseDelay)
	}
	// Success resets an item.
	rl.Forget(a)
	if got := rl.When(a); got != BaseDelay {
		t.Fatalf("after Forget: delay %s, want %s", got, BaseDelay)
	}
}

func TestOptions(t *testing.T) {
	for _, tc := range []struct{ in, want int }{{0, DefaultMaxConcurrentReconciles}, {-3, DefaultMaxConcurrentReconciles}, {1, 1}, {16, 16}} {
		o := Options(tc.in)
		if o.MaxConcurrentReconciles != tc.want {
			t.Errorf("Options(%d).MaxConcurrentReconciles = %d, want %d", tc.in, o.MaxConcurrentReconciles, tc.want)
		}
		if o.RateLimiter == nil {
			t.Fatalf("Options(%d) has no rate limiter", tc.in)
		}
	}
	// Each controller gets its own limiter instance: backoff of one never leaks into another.
	a, b := Options(1).RateLimiter, Options(1).RateLimiter
	req := reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "x", Name: "y"}}
	a.When(req)
	a.When(req)
	if b.NumRequeues(req) != 0 {
		t.Fatal("controllers share one limiter instance")
	}
}
