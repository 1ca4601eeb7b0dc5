package manager

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/go-logr/logr"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"

	"github.com/polycrate/polycrate-operator/internal/kube/delegated"
)

type tokensFunc func(*http.Request) (*authenticator.Response, bool, error)

func (f tokensFunc) AuthenticateRequest(r *http.Request) (*authenticator.Response, bool, error) {
	return f(r)
}

type reviewsFunc func(authorizer.Attributes) (authorizer.Decision, string, error)

func (f reviewsFunc) Authorize(_ context.Context, a authorizer.Attributes) (authorizer.Decision, string, error) {
	return f(a)
}

// A scrape is answered as the kube-apiserver answers a request: no or a
// rejected token 401, no permission 403, a review that could not be made 503;
// what is reviewed is `get` on the path.
func TestAdmitAnswersAsTheKubeAPIServer(t *testing.T) {
	reader := &authenticator.Response{User: &user.DefaultInfo{Name: "system:serviceaccount:monitoring:prometheus"}}
	down := &delegated.Unavailable{Review: "TokenReview", Err: errors.New("connection refused")}
	allow := func(a authorizer.Attributes) (authorizer.Decision, string, error) {
		if a.GetVerb() != "get" || a.GetPath() != "/metrics" || a.IsResourceRequest() {
			return authorizer.DecisionDeny, "wrong attributes", nil
		}
		return authorizer.DecisionAllow, "", nil
	}
	for _, c := range []struct {
		name    string
		tokens  tokensFunc
		reviews reviewsFunc
		want    int
	}{
		{"no token", func(*http.Request) (*authenticator.Response, bool, error) { return nil, false, nil }, allow, http.StatusUnauthorized},
		{"a rejected token", func(*http.Request) (*authenticator.Response, bool, error) {
			return nil, false, errors.New("invalid bearer token")
		}, allow, http.StatusUnauthorized},
		{"the TokenReview failed", func(*http.Request) (*authenticator.Response, bool, error) { return nil, false, down }, allow, http.StatusServiceUnavailable},
		{"denied", func(*http.Request) (*authenticator.Response, bool, error) { return reader, true, nil },
			func(authorizer.Attributes) (authorizer.Decision, string, error) {
				return authorizer.DecisionNoOpinion, "", nil
			}, http.StatusForbidden},
		{"the SubjectAccessReview failed", func(*http.Request) (*authenticator.Response, bool, error) { return reader, true, nil },
			func(authorizer.Attributes) (authorizer.Decision, string, error) {
				return authorizer.DecisionNoOpinion, "", &delegated.Unavailable{Review: "SubjectAccessReview", Err: errors.New("EOF")}
			}, http.StatusServiceUnavailable},
		{"allowed", func(*http.Request) (*authenticator.Response, bool, error) { return reader, true, nil }, allow, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			code, msg := admit(httptest.NewRequest(http.MethodGet, "/metrics", nil), c.tokens, c.reviews, logr.Discard())
			if code != c.want {
				t.Fatalf("status %d (%q), want %d", code, msg, c.want)
			}
		})
	}
}
