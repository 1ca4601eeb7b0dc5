package manager

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/group"
	"k8s.io/apiserver/pkg/authentication/request/bearertoken"
	tokencache "k8s.io/apiserver/pkg/authentication/token/cache"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	authenticationclient "k8s.io/client-go/kubernetes/typed/authentication/v1"
	authorizationclient "k8s.io/client-go/kubernetes/typed/authorization/v1"
	"k8s.io/client-go/rest"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/polycrate/polycrate-operator/internal/kube/delegated"
)

// The reviews' caches, as controller-runtime's metrics filter keeps them: a
// token 1 min, an allowed scrape 5 min, a denied one 30 s.
const (
	metricsTokenTTL = time.Minute
	metricsAllowTTL = 5 * time.Minute
	metricsDenyTTL  = 30 * time.Second
)

// metricsOptions configures the metrics server as kubebuilder v4 scaffolds it.
// Secure: HTTPS (the certificate in MetricsCertDir, else a self-signed one), and
// each request authenticated with a TokenReview and authorized with a
// SubjectAccessReview for `get` on the non-resource URL /metrics. The series
// name endpoints, organizations and error texts: only who RBAC lets read
// /metrics (the metrics-reader ClusterRole) reads them.
//
// The reviews go out with cfg as it was before leader election fenced its
// writes (fence.go): a TokenReview is a POST but changes nothing, and a standby
// replica must answer its scrapes too.
func metricsOptions(o Options, cfg *rest.Config) metricsserver.Options {
	m := metricsserver.Options{BindAddress: o.MetricsBindAddress}
	if !o.MetricsSecure {
		return m
	}
	m.SecureServing = true
	m.CertDir = o.MetricsCertDir
	// HTTP/1.1 only, as kubebuilder's default: HTTP/2's stream resets
	// (CVE-2023-44487, CVE-2023-39325) need no exposure on a scrape port.
	m.TLSOpts = []func(*tls.Config){func(c *tls.Config) { c.NextProtos = []string{"http/1.1"} }}
	m.FilterProvider = func(*rest.Config, *http.Client) (metricsserver.Filter, error) { return metricsFilter(cfg) }
	return m
}

// metricsFilter is controller-runtime's WithAuthenticationAndAuthorization
// (pkg/metrics/filters) on internal/kube/delegated, without the apiserver's
// authenticator and authorizer factories (see there why). One difference: a
// token the kube-apiserver rejects is answered 401, as the kube-apiserver
// answers it, where controller-runtime's filter answers 500; 503 means the
// review could not be made.
func metricsFilter(cfg *rest.Config) (metricsserver.Filter, error) {
	authn, err := authenticationclient.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	authz, err := authorizationclient.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	tokens := group.NewAuthenticatedGroupAdder(bearertoken.New(
		tokencache.New(&delegated.TokenReviewer{Reviews: authn.TokenReviews()}, false, metricsTokenTTL, metricsTokenTTL)))
	reviews := delegated.NewAuthorizer(authz.SubjectAccessReviews(), metricsAllowTTL, metricsDenyTTL)
	return func(log logr.Logger, h http.Handler) (http.Handler, error) {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if code, msg := admit(r, tokens, reviews, log); code != 0 {
				http.Error(w, msg, code)
				return
			}
			h.ServeHTTP(w, r)
		}), nil
	}, nil
}

// admit returns 0 when r's caller may read the path, else the status and text
// to answer with.
func admit(r *http.Request, tokens authenticator.Request, reviews authorizer.UnconditionalAuthorizer, log logr.Logger) (int, string) {
	var unavailable *delegated.Unavailable
	res, ok, err := tokens.AuthenticateRequest(r)
	switch {
	case errors.As(err, &unavailable):
		log.Error(err, "a scrape's token could not be reviewed")
		return http.StatusServiceUnavailable, "the kube-apiserver could not review the token"
	case err != nil || !ok:
		log.V(4).Info("a scrape without a valid token", "reason", fmt.Sprint(err))
		return http.StatusUnauthorized, "Unauthorized"
	}
	attrs := authorizer.AttributesRecord{User: res.User, Verb: strings.ToLower(r.Method), Path: r.URL.Path}
	decision, reason, err := reviews.Authorize(r.Context(), attrs)
	switch {
	case err != nil:
		log.Error(err, "a scrape could not be authorized", "user", res.User.GetName())
		return http.StatusServiceUnavailable, "the kube-apiserver could not review the request"
	case decision != authorizer.DecisionAllow:
		log.V(4).Info("a scrape denied", "user", res.User.GetName(), "reason", reason)
		return http.StatusForbidden, fmt.Sprintf("Authorization denied for user %s", res.User.GetName())
	}
	return 0, ""
}
