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

	"github.com/polycrate/polycrate-operator/internal/controller"
	"github.com/polycrate/polycrate-operator/internal/liveconfig"
	"github.com/polycrate/polycrate-operator/internal/polycrate"
)

// Server serves cert-manager's DNS01 webhook API (an aggregated API server:
// cert-manager's own webhook server package, not its command) from the operator
// process, as the OperatorConfig's dns01_webhook says: it starts when enabled,
// stops when disabled, and restarts when the group, the solver name or the port
// change — live, without a restart of the operator (controller.LiveServer).
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

	once sync.Once
	live *controller.LiveServer[settings]
}

type settings struct {
	Group, Solver string
	Port          int
}

func (s *Server) init() {
	s.once.Do(func() {
		s.live = &controller.LiveServer[settings]{Name: "the cert-manager DNS01 webhook", Config: s.Config, Want: want, Serve: s.serve, Log: s.Log}
	})
}

// NeedLeaderElection: every replica serves (the APIService's Service spreads
// the calls); each holds the API connection (operatorconfig.Replica).
func (s *Server) NeedLeaderElection() bool { return false }

// Start follows the configuration until ctx ends.
func (s *Server) Start(ctx context.Context) error {
	s.init()
	return s.live.Start(ctx)
}

// Running is the port being served, 0 when none.
func (s *Server) Running() int {
	s.init()
	w, ok := s.live.Running()
	if !ok {
		return 0
	}
	return w.Port
}

// want reads dns01_webhook with its defaults.
func want(snap *liveconfig.Snapshot) (settings, bool) {
	w := snap.Spec.DNS01Webhook
	if !w.Enabled {
		return settings{}, false
	}
	out := settings{Group: w.GroupName, Solver: w.SolverName, Port: int(w.Port)}
	if out.Group == "" {
		out.Group = "webhook.dns.polycrate.io"
	}
	if out.Solver == "" {
		out.Solver = "polycrate"
	}
	if out.Port == 0 {
		out.Port = 10250
	}
	return out, true
}

func (s *Server) serve(ctx context.Context, w settings) error {
	solver := &Solver{SolverName: w.Solver, Client: s.Conn.Client}
	o := server.NewWebhookServerOptions(w.Group, solver)
	ro := o.RecommendedOptions
	ro.SecureServing.BindAddress = net.IPv4zero
	ro.SecureServing.BindPort = w.Port
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
