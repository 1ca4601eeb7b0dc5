// Package delegated authenticates and authorizes a request the way
// k8s.io/apiserver's generic server delegates to the kube-apiserver: a bearer
// token checked with a TokenReview, the request checked with a
// SubjectAccessReview, both answers cached. Two listeners use it: the DNS01
// webhook (an aggregated API server, internal/webhooks/dns01) and the secure
// metrics endpoint (internal/manager, metricsauth.go).
//
// It is built on client-go and k8s.io/apiserver's small interfaces
// (authenticator, authorizer, the token cache) rather than the apiserver's
// authenticator and authorizer factories, which controller-runtime's metrics
// filter uses: the factories link their webhook plugins and with them CEL,
// OpenTelemetry's gRPC exporters and the konnectivity client, 219 packages and
// about 12 MB of the operator's binary that the reviews do not need
// (docs/performance.md, "The binary").
package delegated

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/cache"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	authenticationclient "k8s.io/client-go/kubernetes/typed/authentication/v1"
	authorizationclient "k8s.io/client-go/kubernetes/typed/authorization/v1"
	"k8s.io/client-go/util/retry"
)

// ReviewBackoff is the generic server's retry of a failed review
// (DefaultAuthWebhookRetryBackoff): 0.5 s growing 1.5× over 5 attempts.
var ReviewBackoff = wait.Backoff{Duration: 500 * time.Millisecond, Factor: 1.5, Jitter: 0.2, Steps: 5}

// transient: worth another attempt (the API server busy or unreachable), not
// an answer.
func transient(err error) bool {
	return apierrors.IsTooManyRequests(err) || apierrors.IsServerTimeout(err) || apierrors.IsTimeout(err) ||
		apierrors.IsInternalError(err) || apierrors.IsServiceUnavailable(err) || utilnet.IsConnectionReset(err) ||
		utilnet.IsConnectionRefused(err) || utilnet.IsProbableEOF(err)
}

// Unavailable says a review could not be made (the kube-apiserver did not
// answer it, or refused the call): no verdict on the caller.
type Unavailable struct {
	Review string
	Err    error
}

func (e *Unavailable) Error() string {
	return "the kube-apiserver's " + e.Review + ": " + e.Err.Error()
}
func (e *Unavailable) Unwrap() error { return e.Err }

// TokenReviewer authenticates a bearer token with the kube-apiserver's
// TokenReview (the generic server's delegated token authentication); wrap it
// in k8s.io/apiserver's token cache.
type TokenReviewer struct {
	Reviews authenticationclient.TokenReviewInterface
}

var _ authenticator.Token = &TokenReviewer{}

// AuthenticateToken reviews the token. An error never holds the token.
func (t *TokenReviewer) AuthenticateToken(ctx context.Context, token string) (*authenticator.Response, bool, error) {
	review := &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: token}}
	if auds, ok := authenticator.AudiencesFrom(ctx); ok {
		review.Spec.Audiences = auds
	}
	var out *authenticationv1.TokenReview
	err := retry.OnError(ReviewBackoff, transient, func() error {
		var err error
		out, err = t.Reviews.Create(ctx, review, metav1.CreateOptions{})
		return err
	})
	if err != nil {
		return nil, false, &Unavailable{Review: "TokenReview", Err: err}
	}
	if !out.Status.Authenticated {
		if out.Status.Error != "" {
			return nil, false, errors.New(out.Status.Error)
		}
		return nil, false, nil
	}
	extra := map[string][]string{}
	for k, v := range out.Status.User.Extra {
		extra[k] = v
	}
	return &authenticator.Response{Audiences: out.Status.Audiences, User: &user.DefaultInfo{Name: out.Status.User.Username,
		UID: out.Status.User.UID, Groups: out.Status.User.Groups, Extra: extra}}, true, nil
}

// Authorizer asks the kube-apiserver (SubjectAccessReview) whether the caller
// may do what it asks. Answers are cached (allowed for AllowTTL, denied for
// DenyTTL), errors not. Members of AlwaysAllow's groups need no review.
type Authorizer struct {
	reviews           authorizationclient.SubjectAccessReviewInterface
	allowTTL, denyTTL time.Duration
	alwaysAllow       sets.Set[string]
	cache             *cache.LRUExpireCache
}

var _ authorizer.UnconditionalAuthorizer = &Authorizer{}

type answer struct {
	decision authorizer.Decision
	reason   string
}

// NewAuthorizer returns an Authorizer that reviews with reviews.
func NewAuthorizer(reviews authorizationclient.SubjectAccessReviewInterface, allowTTL, denyTTL time.Duration, alwaysAllow ...string) *Authorizer {
	return &Authorizer{reviews: reviews, allowTTL: allowTTL, denyTTL: denyTTL, alwaysAllow: sets.New(alwaysAllow...),
		cache: cache.NewLRUExpireCache(1024)}
}

// Authorize reviews a.
func (z *Authorizer) Authorize(ctx context.Context, a authorizer.Attributes) (authorizer.Decision, string, error) {
	u := a.GetUser()
	if u == nil {
		return authorizer.DecisionDeny, "no user", nil
	}
	for _, g := range u.GetGroups() {
		if z.alwaysAllow.Has(g) {
			return authorizer.DecisionAllow, "", nil
		}
	}
	spec := reviewSpec(u, a)
	key := specKey(spec)
	if v, ok := z.cache.Get(key); ok {
		ans := v.(answer)
		return ans.decision, ans.reason, nil
	}
	var out *authorizationv1.SubjectAccessReview
	err := retry.OnError(ReviewBackoff, transient, func() error {
		var err error
		out, err = z.reviews.Create(ctx, &authorizationv1.SubjectAccessReview{Spec: spec}, metav1.CreateOptions{})
		return err
	})
	if err != nil {
		return authorizer.DecisionNoOpinion, "the kube-apiserver could not review the request", &Unavailable{Review: "SubjectAccessReview", Err: err}
	}
	ans, ttl := answer{decision: authorizer.DecisionNoOpinion, reason: out.Status.Reason}, z.denyTTL
	switch {
	case out.Status.Allowed:
		ans.decision, ttl = authorizer.DecisionAllow, z.allowTTL
	case out.Status.Denied:
		ans.decision = authorizer.DecisionDeny
	}
	if out.Status.EvaluationError != "" && ans.reason == "" {
		ans.reason = out.Status.EvaluationError
	}
	z.cache.Add(key, ans, ttl)
	return ans.decision, ans.reason, nil
}

func reviewSpec(u user.Info, a authorizer.Attributes) authorizationv1.SubjectAccessReviewSpec {
	spec := authorizationv1.SubjectAccessReviewSpec{User: u.GetName(), UID: u.GetUID(), Groups: u.GetGroups()}
	if extra := u.GetExtra(); len(extra) > 0 {
		spec.Extra = map[string]authorizationv1.ExtraValue{}
		for k, v := range extra {
			spec.Extra[k] = v
		}
	}
	if a.IsResourceRequest() {
		spec.ResourceAttributes = &authorizationv1.ResourceAttributes{Namespace: a.GetNamespace(), Verb: a.GetVerb(), Group: a.GetAPIGroup(),
			Version: a.GetAPIVersion(), Resource: a.GetResource(), Subresource: a.GetSubresource(), Name: a.GetName()}
	} else {
		spec.NonResourceAttributes = &authorizationv1.NonResourceAttributes{Path: a.GetPath(), Verb: a.GetVerb()}
	}
	return spec
}

// specKey is the review's spec as a cache key (encoding/json writes a map's
// keys sorted, so equal specs give equal keys).
func specKey(spec authorizationv1.SubjectAccessReviewSpec) string {
	b, _ := json.Marshal(spec)
	return string(b)
}
