package crds

import (
	"context"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
)

// warmProbeSelector matches no object: the probe's answer is empty however many
// objects the resource holds.
const warmProbeSelector = "polycrate.io/storage-warm-probe=none"

// warmPoll is how often a resource whose watch cache is still initialising is
// asked again.
const warmPoll = 25 * time.Millisecond

// WarmResult is what Warm saw of one CRD's resource.
type WarmResult struct {
	Resource string
	// Waited is how long its watch cache took to answer; Ready false when it did
	// not within the deadline (or the probe failed: Err).
	Waited time.Duration
	Ready  bool
	Err    error
}

// Warm opens the API server's storage of each CRD's served version and waits
// (at most timeout) until its watch cache answers.
//
// Why: the API server builds a custom resource's storage, watch cache included,
// on the first request for it, and while that cache initialises it answers a
// watch — and the streaming list every informer starts with — with 429 and
// Retry-After: 1 (k8s.io/apiserver storage/cacher: "storage is (re)initializing",
// KEP-4568). On a cluster whose API server has just started, or after the CRDs
// were installed or updated, each informer of the operator's kinds lost a full
// second that way, twice in a row (the manager's cache, then the controllers'
// sources): 2.0 of the 2.4 s before the first Endpoint at 1,000 Ingresses. A
// list that the cache cannot serve yet asks nothing of the informers and costs
// milliseconds. The probe is a list from the watch cache (resourceVersion 0)
// with a label selector that matches nothing: 429 while the cache initialises,
// an empty answer once it is ready, whatever the number of objects.
func Warm(ctx context.Context, cfg *rest.Config, list []CRD, timeout time.Duration) []WarmResult {
	out := make([]WarmResult, len(list))
	for i, c := range list {
		out[i].Resource = c.Plural() + "." + c.Object.Spec.Group
	}
	rc, err := rest.UnversionedRESTClientFor(metadata.ConfigFor(cfg))
	if err != nil {
		for i := range out {
			out[i].Err = err
		}
		return out
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var wg sync.WaitGroup
	for i, c := range list {
		wg.Go(func() {
			start := time.Now()
			out[i].Ready, out[i].Err = warmOne(ctx, rc, c)
			out[i].Waited = time.Since(start)
		})
	}
	wg.Wait()
	return out
}

// warmOne probes one resource until its watch cache answers. Each probe is sent
// once (MaxRetries 0): client-go would otherwise wait out the Retry-After — the
// very second this saves.
func warmOne(ctx context.Context, rc rest.Interface, c CRD) (bool, error) {
	version := ""
	for _, v := range c.Object.Spec.Versions {
		if v.Served && (version == "" || v.Storage) {
			version = v.Name
		}
	}
	for {
		err := rc.Get().AbsPath("/apis", c.Object.Spec.Group, version, c.Plural()).
			Param("resourceVersion", "0").Param("labelSelector", warmProbeSelector).
			MaxRetries(0).Do(ctx).Error()
		switch {
		case err == nil:
			return true, nil
		case !apierrors.IsTooManyRequests(err):
			return false, err // not ours to judge: the informers will say
		}
		select {
		case <-ctx.Done():
			return false, nil
		case <-time.After(warmPoll):
		}
	}
}
