package dns01

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync"

	"github.com/cert-manager/cert-manager/pkg/acme/webhook/cmd/server"
	"github.com/go-logr/logr"

	"github.com/polycrate/polycrate-operator/internal/liveconfig"
	"github.com/polycrate/polycrate-operator/internal/polycrate"
)

// Server serves cert-manager's DNS01 webhook API (an aggregated API server:
// cert-manager's own webhook server package, not its command) from the operator
// process, as the OperatorConfig's dns01_webhook says: it starts when enabled,
// stops when disabled, and restarts when the group, the solver name or the port
// change — live, without a restart of the operator.
type Server struct {
	Config *liveconfig.Store
	Conn   *polycrate.Connection
	Log    logr.Logger
	// Kubeconfig is what authentication and authorization are delegated to (the
	// kube-apiserver's TokenReview and SubjectAccessReview); empty: in-cluster.
	Kubeconfig string
	// CertDir holds the serving certificate as tls.crt and tls.key (the chart
	// mounts cert-manager's Secret there); where it is missing, a self-signed
	// certificate is made in a temporary directory.
	CertDir string

	mu      sync.Mutex
	running *instance
}

type instance struct {
	settings settings
	stop     context.CancelFunc
	done     chan struct{}
}

type settings struct {
	group, solver string
	port          int
}

// NeedLeaderElection: the leader holds the API connection the solver writes
// through (docs/dns.md: one replica serves).
func (s *Server) NeedLeaderElection() bool { return true }

// Start follows the configuration until ctx ends.
func (s *Server) Start(ctx context.Context) error {
	changes := s.Config.Subscribe()
	defer s.stop()
	for {
		s.apply(ctx)
		select {
		case <-ctx.Done():
			return nil
		case <-changes:
		}
	}
}

// Running is the port being served, 0 when none (for tests and health).
func (s *Server) Running() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.running == nil {
		return 0
	}
	return s.running.settings.port
}

func (s *Server) want() (settings, bool) {
	snap := s.Config.Get()
	if snap == nil || !snap.Spec.DNS01Webhook.Enabled {
		return settings{}, false
	}
	w := snap.Spec.DNS01Webhook
	out := settings{group: w.GroupName, solver: w.SolverName, port: int(w.Port)}
	if out.group == "" {
		out.group = "webhook.dns.polycrate.io"
	}
	if out.solver == "" {
		out.solver = "polycrate"
	}
	if out.port == 0 {
		out.port = 10250
	}
	return out, true
}

func (s *Server) apply(ctx context.Context) {
	want, enabled := s.want()
	s.mu.Lock()
	cur := s.running
	s.mu.Unlock()
	if cur != nil && enabled && cur.settings == want {
		return
	}
	if cur != nil {
		s.stop()
	}
	if !enabled {
		return
	}
	runCtx, cancel := context.WithCancel(ctx)
	inst := &instance{settings: want, stop: cancel, done: make(chan struct{})}
	s.mu.Lock()
	s.running = inst
	s.mu.Unlock()
	go func() {
		defer close(inst.done)
		s.Log.Info("serving the cert-manager DNS01 webhook", "group", want.group, "solver", want.solver, "port", want.port)
		if err := s.serve(runCtx, want); err != nil && runCtx.Err() == nil {
			s.Log.Error(err, "the DNS01 webhook server stopped; it starts again when dns01_webhook changes", "port", want.port)
			s.mu.Lock()
			if s.running == inst {
				s.running = nil
			}
			s.mu.Unlock()
		}
	}()
}

// stop ends the running server and waits for it.
func (s *Server) stop() {
	s.mu.Lock()
	cur := s.running
	s.running = nil
	s.mu.Unlock()
	if cur != nil {
		cur.stop()
		<-cur.done
		s.Log.Info("stopped the cert-manager DNS01 webhook", "port", cur.settings.port)
	}
}

func (s *Server) serve(ctx context.Context, w settings) error {
	solver := &Solver{SolverName: w.solver, Client: s.Conn.Client}
	o := server.NewWebhookServerOptions(w.group, solver)
	ro := o.RecommendedOptions
	ro.SecureServing.BindAddress = net.IPv4zero
	ro.SecureServing.BindPort = w.port
	crt, key := filepath.Join(s.CertDir, "tls.crt"), filepath.Join(s.CertDir, "tls.key")
	if _, err := os.Stat(crt); s.CertDir != "" && err == nil {
		ro.SecureServing.ServerCert.CertKey.CertFile, ro.SecureServing.ServerCert.CertKey.KeyFile = crt, key
	} else {
		dir, err := os.MkdirTemp("", "dns01-webhook-")
		if err != nil {
			return err
		}
		defer func() { _ = os.RemoveAll(dir) }()
		ro.SecureServing.ServerCert.CertDirectory = dir
	}
	ro.Authentication.RemoteKubeConfigFile = s.Kubeconfig
	ro.Authorization.RemoteKubeConfigFile = s.Kubeconfig
	ro.CoreAPI.CoreAPIKubeconfigPath = s.Kubeconfig
	if errs := ro.Validate(); len(errs) > 0 {
		return fmt.Errorf("the DNS01 webhook's options: %v", errs)
	}
	return o.RunWebhookServer(ctx)
}
