package controller

import (
	"context"
	"errors"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/go-logr/logr"

	"github.com/polycrate/polycrate-operator/internal/liveconfig"
)

// LiveServer runs a server as the live configuration says, without a restart of
// the operator: Want reads its settings from the OperatorConfig (false: off);
// it starts when wanted, stops when not, and restarts when the settings change.
// A server that fails (a port in use) is logged and tried again on the next
// configuration change. It runs on every replica (behind a Service), each with
// its own configuration and API connection (operatorconfig.Replica).
type LiveServer[S comparable] struct {
	Name   string
	Config *liveconfig.Store
	Want   func(*liveconfig.Snapshot) (S, bool)
	Serve  func(context.Context, S) error
	Log    logr.Logger

	mu      sync.Mutex
	running *liveInstance[S]
}

type liveInstance[S comparable] struct {
	settings S
	stop     context.CancelFunc
	done     chan struct{}
}

// NeedLeaderElection: every replica serves.
func (l *LiveServer[S]) NeedLeaderElection() bool { return false }

// Start follows the configuration until ctx ends.
func (l *LiveServer[S]) Start(ctx context.Context) error {
	if l.Want == nil || l.Serve == nil || l.Config == nil {
		return errors.New(l.Name + ": a LiveServer needs Config, Want and Serve (build the server with its NewServer)")
	}
	changes := l.Config.Subscribe()
	defer l.stop()
	for {
		l.apply(ctx)
		select {
		case <-ctx.Done():
			return nil
		case <-changes:
		}
	}
}

// Running returns the settings being served, false when none.
func (l *LiveServer[S]) Running() (S, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.running == nil {
		var zero S
		return zero, false
	}
	return l.running.settings, true
}

func (l *LiveServer[S]) apply(ctx context.Context) {
	snap := l.Config.Get()
	var want S
	enabled := false
	if snap != nil {
		want, enabled = l.Want(snap)
	}
	l.mu.Lock()
	cur := l.running
	l.mu.Unlock()
	if cur != nil && enabled && cur.settings == want {
		return
	}
	if cur != nil {
		l.stop()
	}
	if !enabled {
		return
	}
	runCtx, cancel := context.WithCancel(ctx)
	inst := &liveInstance[S]{settings: want, stop: cancel, done: make(chan struct{})}
	l.mu.Lock()
	l.running = inst
	l.mu.Unlock()
	go func() {
		defer close(inst.done)
		l.Log.Info("serving "+l.Name, "settings", want)
		if err := l.Serve(runCtx, want); err != nil && runCtx.Err() == nil {
			l.Log.Error(err, l.Name+" stopped; it starts again when its configuration changes", "settings", want)
			l.mu.Lock()
			if l.running == inst {
				l.running = nil
			}
			l.mu.Unlock()
		}
	}()
}

// stop ends the running server and waits for it.
func (l *LiveServer[S]) stop() {
	l.mu.Lock()
	cur := l.running
	l.running = nil
	l.mu.Unlock()
	if cur != nil {
		cur.stop()
		<-cur.done
		l.Log.Info("stopped "+l.Name, "settings", cur.settings)
	}
}

// shutdownGrace is how long a stopping HTTP server lets its requests finish.
const shutdownGrace = 10 * time.Second

// ServeHTTP serves srv on ln (over TLS from srv.TLSConfig when tlsOn) until ctx
// ends, then shuts it down gracefully (requests in flight get shutdownGrace,
// then the connections are closed). It returns the server's own failure, not
// its closing.
func ServeHTTP(ctx context.Context, srv *http.Server, ln net.Listener, tlsOn bool) error {
	errc := make(chan error, 1)
	go func() {
		if tlsOn {
			errc <- srv.ServeTLS(ln, "", "")
			return
		}
		errc <- srv.Serve(ln)
	}()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	shutdown, cancel := context.WithTimeout(context.Background(), shutdownGrace)
	defer cancel()
	if err := srv.Shutdown(shutdown); err != nil {
		_ = srv.Close()
	}
	if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
