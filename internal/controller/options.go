// Package controller holds what every controller of the operator shares: the
// rate-limit policy and the controller options built from it.
package controller

import (
	"time"

	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// The requeue policy of seed 002 "Rate Limiting & Error Handling".
const (
	// BaseDelay is the first retry delay of a failing item.
	BaseDelay = 5 * time.Second
	// MaxDelay caps the exponential backoff of a failing item.
	MaxDelay = 60 * time.Second
	// DefaultMaxConcurrentReconciles is the default of --max-concurrent-reconciles.
	DefaultMaxConcurrentReconciles = 4
)

// NewRateLimiter returns the operator's per-item exponential rate limiter:
// 5 s, 10 s, 20 s, 40 s, then 60 s for every further failure of the same item,
// reset when the item succeeds. Each controller gets its own instance of the same
// policy: the limiter keys on namespace/name, which two kinds can share.
func NewRateLimiter() workqueue.TypedRateLimiter[reconcile.Request] {
	return workqueue.NewTypedItemExponentialFailureRateLimiter[reconcile.Request](BaseDelay, MaxDelay)
}

// Options returns the controller options every controller of the operator uses.
func Options(maxConcurrentReconciles int) controller.Options {
	if maxConcurrentReconciles < 1 {
		maxConcurrentReconciles = DefaultMaxConcurrentReconciles
	}
	return controller.Options{
		MaxConcurrentReconciles: maxConcurrentReconciles,
		RateLimiter:             NewRateLimiter(),
	}
}
