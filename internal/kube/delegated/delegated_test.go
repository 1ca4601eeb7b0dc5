package delegated

import (
	"context"
	"errors"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

func TestTokenReviewer(t *testing.T) {
	kube := fake.NewClientset()
	kube.PrependReactor("create", "tokenreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		tr := a.(k8stesting.CreateAction).GetObject().(*authenticationv1.TokenReview)
		switch tr.Spec.Token {
		case "good":
			tr.Status = authenticationv1.TokenReviewStatus{Authenticated: true,
				User: authenticationv1.UserInfo{Username: "alice", Groups: []string{"g"}, Extra: map[string]authenticationv1.ExtraValue{"k": {"v"}}}}
		case "expired":
			tr.Status = authenticationv1.TokenReviewStatus{Error: "token expired"}
		case "down":
			return true, nil, apierrors.NewBadRequest("no")
		}
		return true, tr, nil
	})
	r := &TokenReviewer{Reviews: kube.AuthenticationV1().TokenReviews()}
	ctx := context.Background()
	res, ok, err := r.AuthenticateToken(ctx, "good")
	if err != nil || !ok || res.User.GetName() != "alice" || res.User.GetGroups()[0] != "g" || res.User.GetExtra()["k"][0] != "v" {
		t.Fatalf("good: %v %v %v", res, ok, err)
	}
	if _, ok, err := r.AuthenticateToken(ctx, "nobody"); ok || err != nil {
		t.Fatalf("unknown token: %v %v", ok, err)
	}
	var u *Unavailable
	if _, ok, err := r.AuthenticateToken(ctx, "expired"); ok || err == nil || errors.As(err, &u) {
		t.Fatalf("expired: %v %v (a verdict, not an unavailable review)", ok, err)
	}
	_, ok, err = r.AuthenticateToken(ctx, "down")
	if ok || !errors.As(err, &u) || u.Review != "TokenReview" {
		t.Fatalf("failed review: %v %v", ok, err)
	}
}

// Answers are cached for their TTL (allowed and denied each their own), the
// always-allowed groups need no review, and a failed review is not cached.
func TestAuthorizerCachesEachVerdictForItsTTL(t *testing.T) {
	kube := fake.NewClientset()
	calls, fail := 0, false
	kube.PrependReactor("create", "subjectaccessreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		calls++
		if fail {
			return true, nil, apierrors.NewForbidden(authorizationv1.Resource("subjectaccessreviews"), "", errors.New("no"))
		}
		sar := a.(k8stesting.CreateAction).GetObject().(*authorizationv1.SubjectAccessReview)
		sar.Status.Allowed = sar.Spec.User == "reader" && sar.Spec.NonResourceAttributes.Path == "/metrics" && sar.Spec.NonResourceAttributes.Verb == "get"
		sar.Status.Denied = !sar.Status.Allowed
		return true, sar, nil
	})
	z := NewAuthorizer(kube.AuthorizationV1().SubjectAccessReviews(), time.Hour, 50*time.Millisecond, user.SystemPrivilegedGroup)
	ctx := context.Background()
	ask := func(name string, groups ...string) authorizer.Decision {
		d, _, err := z.Authorize(ctx, authorizer.AttributesRecord{User: &user.DefaultInfo{Name: name, Groups: groups}, Verb: "get", Path: "/metrics"})
		if err != nil && !fail {
			t.Fatal(err)
		}
		return d
	}
	if ask("reader") != authorizer.DecisionAllow || ask("reader") != authorizer.DecisionAllow || calls != 1 {
		t.Fatalf("allowed twice, %d reviews; want 1", calls)
	}
	if ask("stranger") != authorizer.DecisionDeny || ask("stranger") != authorizer.DecisionDeny || calls != 2 {
		t.Fatalf("denied twice, %d reviews; want 2", calls)
	}
	time.Sleep(60 * time.Millisecond) // the denial's TTL (a cache's expiry, not a wait for a state)
	if ask("stranger") != authorizer.DecisionDeny || calls != 3 {
		t.Fatalf("a denial outlived its TTL: %d reviews", calls)
	}
	if ask("admin", user.SystemPrivilegedGroup) != authorizer.DecisionAllow || calls != 3 {
		t.Fatalf("system:masters was reviewed")
	}
	fail = true
	for range 2 {
		if d := ask("other"); d != authorizer.DecisionNoOpinion {
			t.Fatalf("a failed review decided %v", d)
		}
	}
	if calls != 5 {
		t.Fatalf("a failed review was cached: %d reviews", calls)
	}
}
