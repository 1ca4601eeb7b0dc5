package controller

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/polycrate/polycrate-operator/internal/liveconfig"
)

// Waker enqueues objects from outside the watches: every object of a kind when
// the configuration changes, the objects a periodic check found.
type Waker struct{ ch chan event.GenericEvent }

// NewWaker returns a Waker; its Source goes into the controller's builder.
func NewWaker() *Waker { return &Waker{ch: make(chan event.GenericEvent, 1024)} }

// Source enqueues what the Waker is given.
func (w *Waker) Source() source.Source {
	return source.Channel(w.ch, &handler.EnqueueRequestForObject{})
}

// Wake enqueues the objects.
func (w *Waker) Wake(ctx context.Context, objs ...client.Object) {
	for _, o := range objs {
		select {
		case w.ch <- event.GenericEvent{Object: o}:
		case <-ctx.Done():
			return
		}
	}
}

// OnConfigChange runs fn (on the leader) after each change of the live
// configuration, until the manager stops.
func OnConfigChange(mgr manager.Manager, cfg *liveconfig.Store, fn func(context.Context)) error {
	changes := cfg.Subscribe()
	return mgr.Add(manager.RunnableFunc(func(ctx context.Context) error {
		for {
			select {
			case <-ctx.Done():
				return nil
			case <-changes:
				fn(ctx)
			}
		}
	}))
}

// WakeOnConfigChange enqueues every object list returns after each change of
// the live configuration (a new connection, local cluster or switch).
func (w *Waker) WakeOnConfigChange(mgr manager.Manager, cfg *liveconfig.Store, list func(context.Context) ([]client.Object, error)) error {
	return OnConfigChange(mgr, cfg, func(ctx context.Context) {
		if objs, err := list(ctx); err == nil {
			w.Wake(ctx, objs...)
		}
	})
}

// Every runs fn on the leader every interval() (read anew each round: a
// configured interval applies from the next round), until the manager stops.
func Every(mgr manager.Manager, interval func() time.Duration, fn func(context.Context)) error {
	return mgr.Add(manager.RunnableFunc(func(ctx context.Context) error {
		for {
			t := time.NewTimer(interval())
			select {
			case <-ctx.Done():
				t.Stop()
				return nil
			case <-t.C:
				fn(ctx)
			}
		}
	}))
}

// Queued is how many wakes wait to be enqueued.
func (w *Waker) Queued() int { return len(w.ch) }

// ListObjects lists into list and returns its items as objects.
func ListObjects(ctx context.Context, c client.Reader, list client.ObjectList, opts ...client.ListOption) ([]client.Object, error) {
	if err := c.List(ctx, list, opts...); err != nil {
		return nil, err
	}
	items, err := meta.ExtractList(list)
	if err != nil {
		return nil, err
	}
	out := make([]client.Object, 0, len(items))
	for _, it := range items {
		if o, ok := it.(client.Object); ok {
			out = append(out, o)
		}
	}
	return out, nil
}
