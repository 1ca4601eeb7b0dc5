package dns01

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/group"
	"k8s.io/apiserver/pkg/authentication/request/anonymous"
	"k8s.io/apiserver/pkg/authentication/request/bearertoken"
	"k8s.io/apiserver/pkg/authentication/request/headerrequest"
	"k8s.io/apiserver/pkg/authentication/request/union"
	x509request "k8s.io/apiserver/pkg/authentication/request/x509"
	tokencache "k8s.io/apiserver/pkg/authentication/token/cache"
	"k8s.io/apiserver/pkg/server/dynamiccertificates"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	certutil "k8s.io/client-go/util/cert"

	"github.com/polycrate/polycrate-operator/internal/controller"
	"github.com/polycrate/polycrate-operator/internal/kube/delegated"
	"github.com/polycrate/polycrate-operator/internal/liveconfig"
	"github.com/polycrate/polycrate-operator/internal/polycrate"
)

// Server serves cert-manager's DNS01 webhook API — an aggregated API of one
// group, one version and one resource that only takes `create` — from the
// operator process, as the OperatorConfig's dns01_webhook says: it starts when
// enabled, stops when disabled, and restarts when the group, the solver name or
// the port change — live, without a restart of the operator (controller.LiveServer).
//
// It is the API server cert-manager's webhook package (pkg/acme/webhook/cmd)
// would run, without k8s.io/apiserver's generic server under it: that server
// brought 560 packages and about 37 MB of resident memory into every operator
// process for three discovery documents and one handler (docs/performance.md).
// The security boundary is the generic server's own: the same k8s.io/apiserver
// packages authenticate the caller (the aggregator's front-proxy certificate with
// X-Remote-* headers, client certificates, bearer tokens through TokenReview,
// anonymous otherwise; the CAs and header names from kube-system's
// extension-apiserver-authentication ConfigMap, followed live) and the
// kube-apiserver authorizes every request (SubjectAccessReview), with the
// generic server's defaults: health paths open, system:masters always allowed,
// answers cached 10 s.
type Server struct {
	Config *liveconfig.Store
	Conn   *polycrate.Connection
	Log    logr.Logger
	// Kubeconfig is what authentication and authorization are delegated to (the
	// kube-apiserver's TokenReview and SubjectAccessReview); empty: in-cluster.
	Kubeconfig string
	// CertDir holds the serving certificate as tls.crt and tls.key (the chart
	// mounts cert-manager's Secret there; a renewed one is picked up); where it
	// is missing, a self-signed certificate is made in memory.
	CertDir string

	controller.LiveServer[settings]
}

type settings struct {
	Group, Solver string
	Port          int
}

// NewServer returns s ready to run (controller.LiveServer, embedded: Start and
// NeedLeaderElection — every replica serves, the APIService's Service spreads
// the calls, each holds the API connection, operatorconfig.Replica).
func NewServer(s *Server) *Server {
	s.LiveServer = controller.LiveServer[settings]{Name: "the cert-manager DNS01 webhook", Config: s.Config, Want: want, Serve: s.serve, Log: s.Log}
	return s
}

// Running is the port being served, 0 when none.
func (s *Server) Running() int {
	w, _ := s.LiveServer.Running()
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

// The kube-apiserver's ConfigMap of the aggregation layer's trust (written by
// the kube-apiserver itself from its --client-ca-file and --requestheader-* flags).
const (
	authConfigMapNamespace = "kube-system"
	authConfigMapName      = "extension-apiserver-authentication"
)

// Delegation defaults of k8s.io/apiserver's generic server.
const (
	reviewCacheTTL = 10 * time.Second
	reviewTimeout  = 10 * time.Second
)

func (s *Server) restConfig() (*rest.Config, error) {
	if s.Kubeconfig == "" {
		return rest.InClusterConfig()
	}
	return clientcmd.BuildConfigFromFlags("", s.Kubeconfig)
}

func (s *Server) serve(ctx context.Context, w settings) error {
	cfg, err := s.restConfig()
	if err != nil {
		return fmt.Errorf("the kube-apiserver to delegate authentication to: %w", err)
	}
	cfg = rest.CopyConfig(cfg)
	cfg.Timeout = reviewTimeout
	cfg.UserAgent = "polycrate-operator/dns01-webhook"
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}

	serving, err := s.servingCert()
	if err != nil {
		return err
	}

	trust, err := s.aggregationTrust(ctx, kube)
	if err != nil {
		return err
	}
	clientCA, proxyCA, proxyHeaders := trust.clientCA, trust.proxyCA, trust.proxyHeaders
	authn := trust.authenticator(kube)
	api := &webhookAPI{
		group:  w.Group,
		solver: &Solver{SolverName: w.Solver, Client: s.Conn.Client},
		authn:  authn,
		authz:  newAuthorizer(kube.AuthorizationV1().SubjectAccessReviews()),
		log:    s.Log,
	}

	// TLS as the generic server serves it: the serving certificate and the
	// client CAs (offered to clients, so that they send their certificate)
	// reloaded when they change.
	tlsCtl := dynamiccertificates.NewDynamicServingCertificateController(&tls.Config{MinVersion: tls.VersionTLS12,
		NextProtos: []string{"h2", "http/1.1"}, ClientAuth: tls.RequestClientCert},
		dynamiccertificates.NewUnionCAContentProvider(clientCA, proxyCA), serving, nil, nil)
	clientCA.AddListener(tlsCtl)
	proxyCA.AddListener(tlsCtl)
	if l, ok := serving.(dynamiccertificates.Notifier); ok {
		l.AddListener(tlsCtl)
	}
	if err := tlsCtl.RunOnce(); err != nil {
		return fmt.Errorf("the DNS01 webhook's TLS configuration: %w", err)
	}

	runCtx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() { stop(); wg.Wait() }()
	goRun := func(f func()) { wg.Add(1); go func() { defer wg.Done(); f() }() }
	goRun(func() { clientCA.Run(runCtx, 1) })
	goRun(func() { proxyCA.Run(runCtx, 1) })
	goRun(func() { proxyHeaders.Run(runCtx, 1) })
	goRun(func() { tlsCtl.Run(1, runCtx.Done()) })
	if c, ok := serving.(dynamiccertificates.ControllerRunner); ok {
		goRun(func() { c.Run(runCtx, 1) })
	}

	ln, err := net.Listen("tcp", net.JoinHostPort("", strconv.Itoa(w.Port)))
	if err != nil {
		return err
	}
	srv := &http.Server{
		Handler:           api,
		TLSConfig:         &tls.Config{MinVersion: tls.VersionTLS12, GetConfigForClient: tlsCtl.GetConfigForClient},
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      2 * callTimeout,
		IdleTimeout:       90 * time.Second,
		MaxHeaderBytes:    1 << 20,
	}
	return controller.ServeHTTP(ctx, srv, ln, true)
}

// trust is the aggregation layer's trust, followed live as the generic server
// does: the client CA, the front proxy's CA and its request headers, from the
// kube-system ConfigMap the kube-apiserver publishes.
type trust struct {
	clientCA, proxyCA *dynamiccertificates.ConfigMapCAController
	proxyHeaders      *headerrequest.RequestHeaderAuthRequestController
}

// aggregationTrust reads the trust once. A ConfigMap that cannot be read (the
// chart's Role in kube-system missing) leaves certificate authentication off,
// not the server: bearer tokens still work, and the controllers keep trying.
func (s *Server) aggregationTrust(ctx context.Context, kube kubernetes.Interface) (*trust, error) {
	clientCA, err := dynamiccertificates.NewDynamicCAFromConfigMapController("client-ca", authConfigMapNamespace, authConfigMapName, "client-ca-file", kube)
	if err != nil {
		return nil, err
	}
	proxyCA, err := dynamiccertificates.NewDynamicCAFromConfigMapController("requestheader-client-ca", authConfigMapNamespace, authConfigMapName,
		"requestheader-client-ca-file", kube)
	if err != nil {
		return nil, err
	}
	proxyHeaders := headerrequest.NewRequestHeaderAuthRequestController(authConfigMapName, authConfigMapNamespace, kube,
		"requestheader-username-headers", "requestheader-uid-headers", "requestheader-group-headers",
		"requestheader-extra-headers-prefix", "requestheader-allowed-names")
	for _, once := range []func(context.Context) error{clientCA.RunOnce, proxyCA.RunOnce, proxyHeaders.RunOnce} {
		if err := once(ctx); err != nil {
			s.Log.Error(err, "reading the aggregation layer's trust; client certificates are not accepted until it can be read",
				"configmap", authConfigMapNamespace+"/"+authConfigMapName)
		}
	}
	return &trust{clientCA: clientCA, proxyCA: proxyCA, proxyHeaders: proxyHeaders}, nil
}

// authenticator authenticates as the generic server does: the front proxy's
// request headers, a client certificate, a bearer token (TokenReview, cached),
// else anonymous.
func (t *trust) authenticator(kube kubernetes.Interface) authenticator.Request {
	return union.NewFailOnError(
		group.NewAuthenticatedGroupAdder(union.New(
			headerrequest.NewDynamicVerifyOptionsSecure(t.proxyCA.VerifyOptions,
				headerrequest.StringSliceProviderFunc(t.proxyHeaders.AllowedClientNames),
				headerrequest.StringSliceProviderFunc(t.proxyHeaders.UsernameHeaders),
				headerrequest.StringSliceProviderFunc(t.proxyHeaders.UIDHeaders),
				headerrequest.StringSliceProviderFunc(t.proxyHeaders.GroupHeaders),
				headerrequest.StringSliceProviderFunc(t.proxyHeaders.ExtraHeaderPrefixes)),
			x509request.NewDynamic(t.clientCA.VerifyOptions, x509request.CommonNameUserConversion),
			bearertoken.New(tokencache.New(&delegated.TokenReviewer{Reviews: kube.AuthenticationV1().TokenReviews()}, false, reviewCacheTTL, reviewCacheTTL)),
		)),
		anonymous.NewAuthenticator(nil),
	)
}

// servingCert is the certificate in CertDir, followed as cert-manager renews
// it, or a self-signed one.
func (s *Server) servingCert() (dynamiccertificates.CertKeyContentProvider, error) {
	crt, key := filepath.Join(s.CertDir, "tls.crt"), filepath.Join(s.CertDir, "tls.key")
	if _, err := os.Stat(crt); s.CertDir != "" && err == nil {
		return dynamiccertificates.NewDynamicServingContentFromFiles("serving-cert", crt, key)
	}
	certPEM, keyPEM, err := certutil.GenerateSelfSignedCertKey("localhost", []net.IP{net.ParseIP("127.0.0.1")}, nil)
	if err != nil {
		return nil, fmt.Errorf("a self-signed certificate for the DNS01 webhook: %w", err)
	}
	return dynamiccertificates.NewStaticCertKeyContent("self-signed", certPEM, keyPEM)
}
