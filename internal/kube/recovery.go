package kube

import "sync"

// Recovery tells its listeners each time the Kubernetes API server answers
// again after it did not (the informers' readiness gate saw /readyz pass,
// internal/manager/resilient.go): a reconcile that failed for want of an answer
// is retried then, not after its back-off of 5 s doubling to 60 s
// (controller.Deps.Options). Its zero value is ready to use; a nil Recovery
// never fires.
type Recovery struct {
	mu sync.Mutex
	ch chan struct{}
}

// NewRecovery returns a Recovery.
func NewRecovery() *Recovery { return &Recovery{} }

// Back says the API server answers again: every channel Next handed out closes.
func (r *Recovery) Back() {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.ch != nil {
		close(r.ch)
	}
	r.ch = make(chan struct{})
}

// Next returns a channel that closes at the next Back (never, for a nil Recovery).
func (r *Recovery) Next() <-chan struct{} {
	if r == nil {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.ch == nil {
		r.ch = make(chan struct{})
	}
	return r.ch
}
