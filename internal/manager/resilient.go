package manager

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	ctrl "sigs.k8s.io/controller-runtime"
)

// Informers that come back within seconds of their API server.
//
// client-go's reflector backs off on every failed watch, every 429 and every
// relist with one exponential back-off (0.8 s doubling to 30 s, jitter up to
// 100 %), which resets only after two minutes without a failure. Five restarts of
// the kube-apiserver during a convergence pushed it to its ceiling: the Ingress
// informer sent no request for 58 s after the server answered again, and
// discovery stayed blind for up to 100 s. The back-off is not configurable
// through a SharedIndexInformer (client-go #136943).
//
// So the operator keeps those failures from the reflector: every informer's
// ListerWatcher is wrapped (resilientLW) so that
//   - a list or watch the API server does not answer (connection refused or
//     reset, 429, 503, a timeout) waits for the apiGate — one probe of /readyz for
//     all informers, every 250 ms doubling to 2 s while it fails, reset each
//     time the server answers — and is then retried;
//   - a watch stream that ends while the reflector still reads it is resumed
//     from the last resource version it delivered, the reflector never sees the
//     break (no "very short watch", no relist);
//   - a resumed watch the server refuses as too old (410 Gone: the API server's
//     watch cache starts anew after a restart, and etcd compacts) is replaced
//     by a list, delivered to the reflector as the changes against what its
//     store holds (ADDED, MODIFIED, DELETED) and a bookmark at the list's
//     resource version: what a relist would do, without its back-off.
// The reflector's own back-off still applies to everything else (a refused list,
// a decoding error).

const (
	gateProbeMin = 250 * time.Millisecond
	gateProbeMax = 2 * time.Second
	// retryAfterMax bounds a 429's Retry-After the wrapper honours.
	retryAfterMax = 10 * time.Second
)

// apiGate tells waiters when the API server answers again: one prober for all.
type apiGate struct {
	// probe returns nil when the API server is ready (GET /readyz).
	probe func(ctx context.Context) error
	log   logr.Logger
	// life ends the prober (the manager's context, or never).
	life context.Context
	// back, if set, is told each time a probe round ends with the server ready
	// (a round starts only when a request went unanswered): kube.Recovery.
	back func()

	mu    sync.Mutex
	round chan struct{} // closed when the server answered; nil: no probing
}

// wait returns when a probe after the call saw the API server ready, or with
// ctx's error.
func (g *apiGate) wait(ctx context.Context) error {
	g.mu.Lock()
	r := g.round
	if r == nil {
		r = make(chan struct{})
		g.round = r
		go g.run(r)
	}
	g.mu.Unlock()
	select {
	case <-r:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (g *apiGate) run(r chan struct{}) {
	life := g.life
	if life == nil {
		life = context.Background()
	}
	delay := gateProbeMin
	start := time.Now()
	for {
		t := time.NewTimer(delay)
		select {
		case <-life.Done():
			t.Stop()
			g.mu.Lock()
			g.round = nil
			close(r)
			g.mu.Unlock()
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(life, 5*time.Second)
		err := g.probe(ctx)
		cancel()
		if err == nil {
			g.mu.Lock()
			g.round = nil
			close(r)
			g.mu.Unlock()
			if waited := time.Since(start); waited > 2*gateProbeMax {
				g.log.Info("the Kubernetes API server answers again: informers resume", "waited", waited.Round(time.Millisecond).String())
			}
			if g.back != nil {
				g.back()
			}
			return
		}
		delay = min(2*delay, gateProbeMax)
	}
}

// unavailable reports whether err means the API server did not answer the
// request (rather than refusing it): worth waiting for the server.
func unavailable(err error) bool {
	if err == nil {
		return false
	}
	var ne net.Error
	switch {
	case apierrors.IsTooManyRequests(err), apierrors.IsServiceUnavailable(err), apierrors.IsTimeout(err),
		apierrors.IsServerTimeout(err):
		return true
	case utilnet.IsConnectionRefused(err), utilnet.IsConnectionReset(err), utilnet.IsProbableEOF(err),
		errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, syscall.ECONNREFUSED):
		return true
	case errors.As(err, &ne) && ne.Timeout():
		return true
	}
	return false
}

// retryAfter is a 429's or 503's Retry-After (0: none), at most retryAfterMax.
func retryAfter(err error) time.Duration {
	if s, ok := apierrors.SuggestsClientDelay(err); ok && s > 0 {
		return min(time.Duration(s)*time.Second, retryAfterMax)
	}
	return 0
}

// resilientLW wraps an informer's ListerWatcher (see the top of this file).
type resilientLW struct {
	inner toolscache.ListerWatcherWithContext
	gate  *apiGate
	// example is the informer's object type (for the bookmark after a list).
	example runtime.Object
	// store is the informer's store, set once the informer exists: what the
	// reflector holds, to turn a list into changes.
	store toolscache.Store
}

var (
	_ toolscache.ListerWatcherWithContext = &resilientLW{}
	_ toolscache.ListerWatcher            = &resilientLW{}
)

// IsWatchListSemanticsUnSupported forwards the inner ListerWatcher's choice
// of a LIST over client-go's streaming list (the Endpoint informer's one-pass
// LIST, endpointlist.go).
func (l *resilientLW) IsWatchListSemanticsUnSupported() bool {
	u, ok := l.inner.(interface{ IsWatchListSemanticsUnSupported() bool })
	return ok && u.IsWatchListSemanticsUnSupported()
}

// pause waits after the attempt-th unavailable answer in a row: its
// Retry-After or a back-off of its own (250 ms doubling to 2 s: a server that
// answers the gate's probe but keeps refusing this request is not asked more
// often), then the gate.
func (l *resilientLW) pause(ctx context.Context, err error, attempt int) error {
	d := gateProbeMin << min(attempt, 3)
	d = max(min(d, gateProbeMax), retryAfter(err))
	{
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
	return l.gate.wait(ctx)
}

func (l *resilientLW) ListWithContext(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
	for attempt := 0; ; attempt++ {
		obj, err := l.inner.ListWithContext(ctx, opts)
		if !unavailable(err) || ctx.Err() != nil {
			return obj, err
		}
		if werr := l.pause(ctx, err, attempt); werr != nil {
			return nil, err
		}
	}
}

func (l *resilientLW) List(opts metav1.ListOptions) (runtime.Object, error) {
	return l.ListWithContext(context.Background(), opts)
}

func (l *resilientLW) Watch(opts metav1.ListOptions) (watch.Interface, error) {
	return l.WatchWithContext(context.Background(), opts)
}

// watchOnce opens the inner watch, waiting out an API server that does not answer.
func (l *resilientLW) watchOnce(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	for attempt := 0; ; attempt++ {
		w, err := l.inner.WatchWithContext(ctx, opts)
		if !unavailable(err) || ctx.Err() != nil {
			return w, err
		}
		if werr := l.pause(ctx, err, attempt); werr != nil {
			return nil, err
		}
	}
}

func (l *resilientLW) WatchWithContext(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	w, err := l.watchOnce(ctx, opts)
	streaming := opts.SendInitialEvents != nil && *opts.SendInitialEvents
	if err != nil || (!streaming && (opts.ResourceVersion == "" || opts.ResourceVersion == "0")) {
		// A watch from "any" version: nothing to resume from.
		return w, err
	}
	// A streaming list becomes resumable once its initial events are complete
	// (the reflector goes on watching on it): it gets its relay now, not at its
	// first end 5–10 minutes later — an informer's goroutines stay as they
	// started (the soak's goroutine count, docs/reliability.md).
	ctx, cancel := context.WithCancel(ctx)
	rw := &resumingWatch{lw: l, ctx: ctx, cancel: cancel, opts: opts, rv: opts.ResourceVersion,
		out: make(chan watch.Event), current: w, initial: streaming}
	go rw.run()
	return rw, nil
}

// resumingWatch is a watch that survives the end of its stream.
type resumingWatch struct {
	lw     *resilientLW
	ctx    context.Context
	cancel context.CancelFunc
	opts   metav1.ListOptions
	rv     string // the last resource version delivered
	out    chan watch.Event
	// initial: a streaming list whose initial events are not complete yet
	// (no bookmark with metav1.InitialEventsAnnotationKey): an end then is
	// the reflector's to handle (it lists anew), as without the wrapper.
	initial bool

	mu      sync.Mutex
	current watch.Interface
	stopped bool
}

func (w *resumingWatch) ResultChan() <-chan watch.Event { return w.out }

func (w *resumingWatch) Stop() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.stopped {
		return
	}
	w.stopped = true
	w.cancel()
	if w.current != nil {
		w.current.Stop()
	}
}

func (w *resumingWatch) setCurrent(c watch.Interface) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.stopped {
		if c != nil {
			c.Stop()
		}
		return false
	}
	w.current = c
	return true
}

func (w *resumingWatch) send(ev watch.Event) bool {
	select {
	case w.out <- ev:
		return true
	case <-w.ctx.Done():
		return false
	}
}

func (w *resumingWatch) run() {
	defer close(w.out)
	defer w.Stop()
	for {
		w.mu.Lock()
		cur := w.current
		w.mu.Unlock()
		gone, ok := w.relay(cur)
		if !ok {
			return
		}
		if w.initial {
			if gone != nil {
				w.send(watch.Event{Type: watch.Error, Object: statusOf(gone)})
			}
			return
		}
		// The stream ended (or said 410): resume from the last version.
		if gone != nil {
			if !w.relist(gone) {
				return
			}
			continue
		}
		next, err := w.lw.watchOnce(w.ctx, w.from(w.rv))
		switch {
		case w.ctx.Err() != nil:
			return
		case isGone(err):
			if !w.relist(err) {
				return
			}
		case err != nil:
			// Refused otherwise: the reflector decides (as without the wrapper).
			w.send(watch.Event{Type: watch.Error, Object: statusOf(err)})
			return
		default:
			if !w.setCurrent(next) {
				return
			}
		}
	}
}

// relay forwards cur's events until it ends: gone is a 410 it said (not
// forwarded); ok false when the consumer stopped or an event ended the watch.
func (w *resumingWatch) relay(cur watch.Interface) (gone error, ok bool) {
	for {
		select {
		case <-w.ctx.Done():
			return nil, false
		case ev, open := <-cur.ResultChan():
			if !open {
				return nil, true
			}
			if ev.Type == watch.Error {
				err := apierrors.FromObject(ev.Object)
				if isGone(err) {
					cur.Stop()
					return err, true
				}
				if unavailable(err) {
					cur.Stop()
					return nil, true // resume after the gate
				}
				w.send(ev)
				return nil, false
			}
			if a, err := meta.Accessor(ev.Object); err == nil && a.GetResourceVersion() != "" {
				w.rv = a.GetResourceVersion()
				if w.initial && ev.Type == watch.Bookmark && a.GetAnnotations()[metav1.InitialEventsAnnotationKey] == "true" {
					w.initial = false
				}
			}
			if !w.send(ev) {
				return nil, false
			}
		}
	}
}

// relist replaces a watch the server refused as too old: a list, delivered as
// the changes against the reflector's store, a bookmark at its version, and a
// watch from there.
func (w *resumingWatch) relist(gone error) bool {
	if w.lw.store == nil || w.lw.example == nil {
		w.send(watch.Event{Type: watch.Error, Object: statusOf(gone)})
		return false
	}
	// The latest state (a quorum read), as the reflector relists after a 410.
	opts := metav1.ListOptions{LabelSelector: w.opts.LabelSelector, FieldSelector: w.opts.FieldSelector}
	list, err := w.lw.ListWithContext(w.ctx, opts)
	if err != nil {
		w.send(watch.Event{Type: watch.Error, Object: statusOf(gone)})
		return false
	}
	rv, err := meta.NewAccessor().ResourceVersion(list)
	if err != nil || rv == "" {
		w.send(watch.Event{Type: watch.Error, Object: statusOf(gone)})
		return false
	}
	items, err := meta.ExtractList(list)
	if err != nil {
		w.send(watch.Event{Type: watch.Error, Object: statusOf(gone)})
		return false
	}
	seen := make(map[string]struct{}, len(items))
	for _, it := range items {
		key, err := toolscache.MetaNamespaceKeyFunc(it)
		if err != nil {
			continue
		}
		seen[key] = struct{}{}
		typ := watch.Added
		if old, exists, _ := w.lw.store.GetByKey(key); exists {
			if oa, err := meta.Accessor(old); err == nil {
				if na, err := meta.Accessor(it); err == nil && oa.GetResourceVersion() == na.GetResourceVersion() {
					continue // unchanged
				}
			}
			typ = watch.Modified
		}
		if !w.send(watch.Event{Type: typ, Object: it}) {
			return false
		}
	}
	for _, key := range w.lw.store.ListKeys() {
		if _, ok := seen[key]; ok {
			continue
		}
		old, exists, _ := w.lw.store.GetByKey(key)
		if !exists {
			continue
		}
		if o, ok := old.(runtime.Object); ok {
			if !w.send(watch.Event{Type: watch.Deleted, Object: o}) {
				return false
			}
		}
	}
	bm := w.lw.example.DeepCopyObject()
	if a, err := meta.Accessor(bm); err == nil {
		a.SetResourceVersion(rv)
		if !w.send(watch.Event{Type: watch.Bookmark, Object: bm}) {
			return false
		}
	}
	w.rv = rv
	next, err := w.lw.watchOnce(w.ctx, w.from(rv))
	if err != nil {
		if w.ctx.Err() == nil {
			w.send(watch.Event{Type: watch.Error, Object: statusOf(err)})
		}
		return false
	}
	return w.setCurrent(next)
}

// from is the watch's options to resume at rv: past a streaming list's
// initial events, a plain watch.
func (w *resumingWatch) from(rv string) metav1.ListOptions {
	opts := w.opts
	opts.ResourceVersion = rv
	if opts.SendInitialEvents != nil {
		opts.SendInitialEvents, opts.ResourceVersionMatch, opts.AllowWatchBookmarks = nil, "", true
	}
	return opts
}

func isGone(err error) bool {
	return err != nil && (apierrors.IsResourceExpired(err) || apierrors.IsGone(err))
}

// statusOf is err as an ERROR event's object, as the API server sends it.
func statusOf(err error) runtime.Object {
	var se apierrors.APIStatus
	if errors.As(err, &se) {
		st := se.Status()
		return &st
	}
	return &metav1.Status{Status: metav1.StatusFailure, Message: err.Error(), Code: http.StatusInternalServerError,
		Reason: metav1.StatusReasonInternalError}
}

// readyzProbe asks the API server's /readyz: nil when it answers at all but
// with a 5xx or 429 (a 401 or 403 is an answer: the server is up).
func readyzProbe(hc *http.Client, host string) func(ctx context.Context) error {
	return func(ctx context.Context) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(host, "/")+"/readyz", nil)
		if err != nil {
			return err
		}
		resp, err := hc.Do(req)
		if err != nil {
			return err
		}
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		_ = resp.Body.Close()
		if resp.StatusCode >= 500 || resp.StatusCode == http.StatusTooManyRequests {
			return fmt.Errorf("readyz: %s", resp.Status)
		}
		return nil
	}
}

// newAPIGate probes the API server of cfg with the manager's HTTP client (once
// it exists) or one of its own.
func newAPIGate(cfg *rest.Config, client func() *http.Client) *apiGate {
	own := sync.OnceValues(func() (*http.Client, error) { return rest.HTTPClientFor(cfg) })
	return &apiGate{log: ctrl.Log.WithName("informers"), probe: func(ctx context.Context) error {
		hc := client()
		if hc == nil {
			var err error
			if hc, err = own(); err != nil {
				return err
			}
		}
		return readyzProbe(hc, cfg.Host)(ctx)
	}}
}
