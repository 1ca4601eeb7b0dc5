package dns01

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/go-logr/logr/testr"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"

	"github.com/polycrate/polycrate-operator/internal/polycrate"
)

type fixedAuthn struct {
	user *user.DefaultInfo
	err  error
}

func (f fixedAuthn) AuthenticateRequest(*http.Request) (*authenticator.Response, bool, error) {
	if f.err != nil || f.user == nil {
		return nil, false, f.err
	}
	return &authenticator.Response{User: f.user}, true, nil
}

// recordingAuthz allows what allow says and records what it was asked.
type recordingAuthz struct {
	allow func(authorizer.Attributes) bool
	asked []authorizer.Attributes
}

func (z *recordingAuthz) Authorize(_ context.Context, a authorizer.Attributes) (authorizer.Decision, string, error) {
	z.asked = append(z.asked, a)
	if z.allow(a) {
		return authorizer.DecisionAllow, "", nil
	}
	return authorizer.DecisionNoOpinion, "no RBAC policy matched", nil
}

// TestWebhookAPIRoutes holds the served API to what cert-manager's webhook
// package serves (documents, verbs, status codes) and the order of the checks:
// health open, then authentication, then authorization, then the route.
func TestWebhookAPIRoutes(t *testing.T) {
	c, _, _, _ := startAPI(t)
	authz := &recordingAuthz{allow: func(a authorizer.Attributes) bool { return a.GetUser().GetName() != "mallory" }}
	api := &webhookAPI{group: "webhook.dns.polycrate.io", solver: &Solver{SolverName: "polycrate", Client: func() *polycrate.Client { return c }},
		authz: authz, log: testr.New(t)}
	do := func(authn fixedAuthn, method, path, contentType, accept, body string) (int, string, map[string]any) {
		api.authn = authn
		req := httptest.NewRequest(method, path, strings.NewReader(body))
		if contentType != "" {
			req.Header.Set("Content-Type", contentType)
		}
		if accept != "" {
			req.Header.Set("Accept", accept)
		}
		rec := httptest.NewRecorder()
		api.ServeHTTP(rec, req)
		out := map[string]any{}
		_ = json.Unmarshal(rec.Body.Bytes(), &out)
		return rec.Code, rec.Header().Get("Content-Type"), out
	}
	alice := fixedAuthn{user: &user.DefaultInfo{Name: "alice", Groups: []string{"system:authenticated"}}}
	mallory := fixedAuthn{user: &user.DefaultInfo{Name: "mallory"}}
	payload := func(action string) string {
		return `{"apiVersion":"webhook.acme.cert-manager.io/v1alpha1","kind":"ChallengePayload","request":{"uid":"u1","action":"` + action +
			`","type":"dns-01","dnsName":"shop.example.com","key":"k1","resolvedFQDN":"_acme-challenge.shop.example.com.","resolvedZone":"example.com."}}`
	}
	const res = "/apis/webhook.dns.polycrate.io/v1alpha1/polycrate"

	for _, tc := range []struct {
		name                           string
		authn                          fixedAuthn
		method, path, ct, accept, body string
		code                           int
		contentType                    string
		check                          func(map[string]any) bool
	}{
		{name: "health needs nobody", method: "GET", path: "/healthz", code: 200, contentType: "text/plain; charset=utf-8"},
		{name: "readyz needs nobody", method: "GET", path: "/readyz", code: 200},
		{name: "an error in authentication is 401", authn: fixedAuthn{err: errors.New("token expired")}, method: "GET", path: "/apis", code: 401,
			check: func(m map[string]any) bool { return m["kind"] == "Status" && m["reason"] == "Unauthorized" }},
		{name: "nobody authenticated is 401", method: "GET", path: "/apis", code: 401},
		{name: "refused by the review is 403", authn: mallory, method: "POST", path: res, ct: "application/json", body: payload("Present"), code: 403,
			check: func(m map[string]any) bool {
				return m["reason"] == "Forbidden" && strings.Contains(m["message"].(string), `User "mallory" cannot create resource "polycrate" in API group "webhook.dns.polycrate.io"`)
			}},
		{name: "group list", authn: alice, method: "GET", path: "/apis", code: 200, contentType: "application/json",
			check: func(m map[string]any) bool {
				return m["kind"] == "APIGroupList" && strings.Contains(mustJSON(m), `"name":"webhook.dns.polycrate.io"`)
			}},
		{name: "aggregated discovery when asked for", authn: alice, method: "GET", path: "/apis",
			accept: "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json", code: 200, contentType: aggregatedDiscovery,
			check: func(m map[string]any) bool {
				return m["kind"] == "APIGroupDiscoveryList" && strings.Contains(mustJSON(m), `"resource":"polycrate"`) &&
					strings.Contains(mustJSON(m), `"verbs":["create"]`)
			}},
		{name: "group", authn: alice, method: "GET", path: "/apis/webhook.dns.polycrate.io", code: 200,
			check: func(m map[string]any) bool { return m["kind"] == "APIGroup" && m["name"] == "webhook.dns.polycrate.io" }},
		{name: "resource list", authn: alice, method: "GET", path: "/apis/webhook.dns.polycrate.io/v1alpha1", code: 200,
			check: func(m map[string]any) bool {
				return m["kind"] == "APIResourceList" && strings.Contains(mustJSON(m), `"kind":"ChallengePayload","name":"polycrate","namespaced":false`)
			}},
		{name: "another group is 404", authn: alice, method: "GET", path: "/apis/other.example.com/v1alpha1", code: 404},
		{name: "another resource is 404", authn: alice, method: "POST", path: "/apis/webhook.dns.polycrate.io/v1alpha1/other", ct: "application/json", body: payload("Present"), code: 404},
		{name: "a namespaced path is 404", authn: alice, method: "POST", path: "/apis/webhook.dns.polycrate.io/v1alpha1/namespaces/default/polycrate", ct: "application/json", body: payload("Present"), code: 404},
		{name: "list is 405", authn: alice, method: "GET", path: res, code: 405},
		{name: "POST on discovery is 405", authn: alice, method: "POST", path: "/apis", code: 405},
		{name: "not JSON is 415", authn: alice, method: "POST", path: res, ct: "application/yaml", body: "request: {}", code: 415},
		{name: "malformed JSON is 400", authn: alice, method: "POST", path: res, ct: "application/json", body: `{"request":`, code: 400},
		{name: "another kind is 400", authn: alice, method: "POST", path: res, ct: "application/json", body: `{"kind":"Secret","request":{}}`, code: 400},
		{name: "no request is 400", authn: alice, method: "POST", path: res, ct: "application/json", body: `{"kind":"ChallengePayload"}`, code: 400},
		{name: "an unknown action is 400", authn: alice, method: "POST", path: res, ct: "application/json", body: payload("Explode"), code: 400},
		{name: "present", authn: alice, method: "POST", path: res, ct: "application/json", body: payload("Present"), code: 201,
			check: func(m map[string]any) bool {
				return m["kind"] == "ChallengePayload" && m["apiVersion"] == "webhook.acme.cert-manager.io/v1alpha1" &&
					mustJSON(m["response"]) == `{"success":true,"uid":"u1"}`
			}},
		{name: "cleanup", authn: alice, method: "POST", path: res, ct: "application/json", body: payload("CleanUp"), code: 201,
			check: func(m map[string]any) bool { return mustJSON(m["response"]) == `{"success":true,"uid":"u1"}` }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, ct, out := do(tc.authn, tc.method, tc.path, tc.ct, tc.accept, tc.body)
			if code != tc.code {
				t.Fatalf("%s %s: %d, want %d (%v)", tc.method, tc.path, code, tc.code, out)
			}
			if tc.contentType != "" && ct != tc.contentType {
				t.Fatalf("content type %q, want %q", ct, tc.contentType)
			}
			if tc.check != nil && !tc.check(out) {
				t.Fatalf("body %s", mustJSON(out))
			}
		})
	}
	// The review was asked as the kube-apiserver would be: a resource request
	// for create, discovery as a non-resource get.
	var sawCreate, sawDiscovery bool
	for _, a := range authz.asked {
		sawCreate = sawCreate || a.IsResourceRequest() && a.GetVerb() == "create" && a.GetResource() == "polycrate" && a.GetAPIGroup() == "webhook.dns.polycrate.io"
		sawDiscovery = sawDiscovery || !a.IsResourceRequest() && a.GetVerb() == "get" && a.GetPath() == "/apis"
	}
	if !sawCreate || !sawDiscovery {
		t.Fatalf("reviews asked: %+v", authz.asked)
	}
}

// TestSolverFailureIsAnAnswer: a failing solver is a 201 with success=false
// and the message, which cert-manager's client reads (not an HTTP error).
func TestSolverFailureIsAnAnswer(t *testing.T) {
	api := &webhookAPI{group: "g.example.com", solver: &Solver{SolverName: "s", Client: func() *polycrate.Client { return nil }},
		authn: fixedAuthn{user: &user.DefaultInfo{Name: "a", Groups: []string{user.SystemPrivilegedGroup}}}, log: testr.New(t),
		authz: &recordingAuthz{allow: func(authorizer.Attributes) bool { return false }}}
	req := httptest.NewRequest("POST", "/apis/g.example.com/v1alpha1/s", strings.NewReader(
		`{"request":{"uid":"u2","action":"Present","resolvedFQDN":"_acme-challenge.a.example.com.","key":"k"}}`))
	rec := httptest.NewRecorder()
	// system:masters passes the authorizer that refuses everyone else.
	api.authz = newAuthorizer(nil)
	api.ServeHTTP(rec, req)
	out := map[string]any{}
	_ = json.Unmarshal(rec.Body.Bytes(), &out)
	resp, _ := out["response"].(map[string]any)
	if rec.Code != 201 || resp["success"] == true || resp["uid"] != "u2" ||
		!strings.Contains(mustJSON(resp["status"]), "not connected to the Polycrate API") {
		t.Fatalf("%d %s", rec.Code, rec.Body.String())
	}
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
