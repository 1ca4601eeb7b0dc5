package dns01

import (
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"

	whapi "github.com/cert-manager/cert-manager/pkg/acme/webhook/apis/acme/v1alpha1"
	"github.com/go-logr/logr"
	apidiscoveryv2 "k8s.io/api/apidiscovery/v2"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	apirequest "k8s.io/apiserver/pkg/endpoints/request"
	authorizationclient "k8s.io/client-go/kubernetes/typed/authorization/v1"

	"github.com/polycrate/polycrate-operator/internal/kube/delegated"
)

// The served API: cert-manager's ChallengePayload under the configured group,
// version v1alpha1, resource <solver name>, verb create — what cert-manager's
// webhook package serves, document for document.
const (
	version     = "v1alpha1"
	payloadKind = "ChallengePayload"
	// maxBody bounds a request body (a ChallengePayload is about 1 KB; the
	// generic server's limit is 3 MB).
	maxBody = 1 << 20
	// aggregatedDiscovery is the media type of the aggregator's discovery
	// request (apidiscovery.k8s.io/v2).
	aggregatedDiscovery = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
)

// alwaysAllowPaths and the group of newAuthorizer are the generic server's
// defaults (RecommendedOptions): health probes need no review, system:masters
// none.
var alwaysAllowPaths = sets.New("/healthz", "/readyz", "/livez")

// newAuthorizer is the generic server's delegated authorization: answers
// cached 10 s, allowed and denied alike.
func newAuthorizer(reviews authorizationclient.SubjectAccessReviewInterface) *delegated.Authorizer {
	return delegated.NewAuthorizer(reviews, reviewCacheTTL, reviewCacheTTL, user.SystemPrivilegedGroup)
}

type webhookAPI struct {
	group  string
	solver *Solver
	authn  authenticator.Request
	authz  authorizer.UnconditionalAuthorizer
	log    logr.Logger
}

func (a *webhookAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if alwaysAllowPaths.Has(r.URL.Path) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = io.WriteString(w, "ok")
		return
	}
	resp, ok, err := a.authn.AuthenticateRequest(r)
	if err != nil || !ok {
		// The message is the generic server's; the reason goes to the log
		// (never a token: the authenticators do not put it in their errors).
		a.log.V(1).Info("refused an unauthenticated request to the DNS01 webhook", "path", r.URL.Path, "remote", r.RemoteAddr, "reason", fmt.Sprint(err))
		writeStatus(w, apierrors.NewUnauthorized("Unauthorized"))
		return
	}
	// Credentials are for this server only: they are not passed on.
	r.Header.Del("Authorization")
	info, err := (&apirequest.RequestInfoFactory{APIPrefixes: sets.NewString("apis"), GrouplessAPIPrefixes: sets.NewString()}).NewRequestInfo(r)
	if err != nil {
		writeStatus(w, apierrors.NewBadRequest(err.Error()))
		return
	}
	attrs := attributesOf(resp.User, info)
	decision, reason, err := a.authz.Authorize(r.Context(), attrs)
	if decision != authorizer.DecisionAllow {
		if err != nil {
			a.log.Error(err, "reviewing a request to the DNS01 webhook with the kube-apiserver", "user", resp.User.GetName(), "path", r.URL.Path)
		}
		writeStatus(w, forbidden(attrs, reason))
		return
	}
	a.route(w, r, info)
}

func (a *webhookAPI) route(w http.ResponseWriter, r *http.Request, info *apirequest.RequestInfo) {
	gv := a.group + "/" + version
	switch {
	case !info.IsResourceRequest && (r.URL.Path == "/apis" || r.URL.Path == "/apis/"):
		a.discoveryRoot(w, r)
	case !info.IsResourceRequest && (r.URL.Path == "/apis/"+a.group || r.URL.Path == "/apis/"+a.group+"/"):
		writeGet(w, r, a.apiGroup())
	case !info.IsResourceRequest && (r.URL.Path == "/apis/"+gv || r.URL.Path == "/apis/"+gv+"/"):
		writeGet(w, r, &metav1.APIResourceList{TypeMeta: metav1.TypeMeta{Kind: "APIResourceList", APIVersion: "v1"}, GroupVersion: gv,
			APIResources: []metav1.APIResource{{Name: a.solver.Name(), SingularName: payloadKind, Namespaced: false,
				Group: whapi.SchemeGroupVersion.Group, Version: whapi.SchemeGroupVersion.Version, Kind: payloadKind, Verbs: []string{"create"}}}})
	case info.IsResourceRequest && info.APIGroup == a.group && info.APIVersion == version && info.Resource == a.solver.Name() &&
		info.Subresource == "" && info.Namespace == "" && info.Name == "":
		if r.Method != http.MethodPost {
			writeStatus(w, apierrors.NewMethodNotSupported(schema.GroupResource{Group: info.APIGroup, Resource: info.Resource}, info.Verb))
			return
		}
		a.create(w, r)
	default:
		writeStatus(w, &apierrors.StatusError{ErrStatus: metav1.Status{Status: metav1.StatusFailure, Code: http.StatusNotFound,
			Reason: metav1.StatusReasonNotFound, Message: "the server could not find the requested resource"}})
	}
}

func (a *webhookAPI) apiGroup() *metav1.APIGroup {
	gv := metav1.GroupVersionForDiscovery{GroupVersion: a.group + "/" + version, Version: version}
	return &metav1.APIGroup{TypeMeta: metav1.TypeMeta{Kind: "APIGroup", APIVersion: "v1"}, Name: a.group,
		Versions: []metav1.GroupVersionForDiscovery{gv}, PreferredVersion: gv}
}

// discoveryRoot answers /apis: the aggregated discovery document when asked for
// it (the aggregator does), else the group list.
func (a *webhookAPI) discoveryRoot(w http.ResponseWriter, r *http.Request) {
	if (r.Method == http.MethodGet || r.Method == http.MethodHead) && acceptsAggregated(r.Header.Values("Accept")) {
		doc := &apidiscoveryv2.APIGroupDiscoveryList{TypeMeta: metav1.TypeMeta{Kind: "APIGroupDiscoveryList", APIVersion: "apidiscovery.k8s.io/v2"},
			Items: []apidiscoveryv2.APIGroupDiscovery{{ObjectMeta: metav1.ObjectMeta{Name: a.group},
				Versions: []apidiscoveryv2.APIVersionDiscovery{{Version: version, Freshness: apidiscoveryv2.DiscoveryFreshnessCurrent,
					Resources: []apidiscoveryv2.APIResourceDiscovery{{Resource: a.solver.Name(), SingularResource: payloadKind,
						ResponseKind: &metav1.GroupVersionKind{Group: whapi.SchemeGroupVersion.Group, Version: whapi.SchemeGroupVersion.Version, Kind: payloadKind},
						Scope:        apidiscoveryv2.ScopeCluster, Verbs: []string{"create"}}}}}}}}
		writeJSON(w, r, http.StatusOK, aggregatedDiscovery, doc)
		return
	}
	writeGet(w, r, &metav1.APIGroupList{TypeMeta: metav1.TypeMeta{Kind: "APIGroupList", APIVersion: "v1"}, Groups: []metav1.APIGroup{*a.apiGroup()}})
}

// acceptsAggregated: one of the Accept header's media ranges is the v2
// aggregated discovery type.
func acceptsAggregated(accept []string) bool {
	for _, h := range accept {
		for _, part := range strings.Split(h, ",") {
			mt, params, err := mime.ParseMediaType(strings.TrimSpace(part))
			if err == nil && mt == "application/json" && params["g"] == "apidiscovery.k8s.io" && params["v"] == "v2" && params["as"] == "APIGroupDiscoveryList" {
				return true
			}
		}
	}
	return false
}

// create runs the solver for one ChallengePayload, as cert-manager's REST
// storage does: 201 with the payload and its response; a solver's failure is
// success=false with the message, not an HTTP error (cert-manager reads it there).
func (a *webhookAPI) create(w http.ResponseWriter, r *http.Request) {
	if ct := r.Header.Get("Content-Type"); ct != "" {
		if mt, _, err := mime.ParseMediaType(ct); err != nil || mt != "application/json" {
			writeStatus(w, &apierrors.StatusError{ErrStatus: metav1.Status{Status: metav1.StatusFailure, Code: http.StatusUnsupportedMediaType,
				Reason: metav1.StatusReasonUnsupportedMediaType, Message: fmt.Sprintf("the body of the request was in an unknown format - accepted media types include: application/json (got %q)", ct)}})
			return
		}
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	if err != nil {
		writeStatus(w, apierrors.NewRequestEntityTooLargeError(fmt.Sprintf("limit is %d bytes", maxBody)))
		return
	}
	payload := &whapi.ChallengePayload{}
	if err := json.Unmarshal(body, payload); err != nil {
		writeStatus(w, apierrors.NewBadRequest("the body is not a ChallengePayload: "+err.Error()))
		return
	}
	if payload.Kind != "" && payload.Kind != payloadKind {
		writeStatus(w, apierrors.NewBadRequest(fmt.Sprintf("the body is a %s, not a %s", payload.Kind, payloadKind)))
		return
	}
	if payload.Request == nil {
		writeStatus(w, apierrors.NewBadRequest("payload request field cannot be empty"))
		return
	}
	var run func(*whapi.ChallengeRequest) error
	switch payload.Request.Action {
	case whapi.ChallengeActionPresent:
		run = a.solver.Present
	case whapi.ChallengeActionCleanUp:
		run = a.solver.CleanUp
	default:
		writeStatus(w, apierrors.NewBadRequest(fmt.Sprintf("unknown action type %q", payload.Request.Action)))
		return
	}
	req := *payload.Request
	if err := run(&req); err != nil {
		a.log.Error(err, "the DNS01 challenge failed", "action", req.Action, "fqdn", req.ResolvedFQDN, "uid", req.UID)
		payload.Response = &whapi.ChallengeResponse{UID: req.UID, Result: &metav1.Status{Status: "Failed", Message: err.Error()}}
	} else {
		payload.Response = &whapi.ChallengeResponse{UID: req.UID, Success: true}
	}
	payload.TypeMeta = metav1.TypeMeta{APIVersion: whapi.SchemeGroupVersion.String(), Kind: payloadKind}
	writeJSON(w, r, http.StatusCreated, "application/json", payload)
}

func writeGet(w http.ResponseWriter, r *http.Request, obj any) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		writeStatus(w, &apierrors.StatusError{ErrStatus: metav1.Status{Status: metav1.StatusFailure, Code: http.StatusMethodNotAllowed,
			Reason: metav1.StatusReasonMethodNotAllowed, Message: fmt.Sprintf("%s is not supported on %s", r.Method, r.URL.Path)}})
		return
	}
	writeJSON(w, r, http.StatusOK, "application/json", obj)
}

func writeJSON(w http.ResponseWriter, r *http.Request, code int, contentType string, obj any) {
	b, err := json.Marshal(obj)
	if err != nil {
		code, b = http.StatusInternalServerError, []byte(`{"kind":"Status","apiVersion":"v1","status":"Failure","code":500}`)
	}
	w.Header().Set("Content-Type", contentType)
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
	if r == nil || r.Method != http.MethodHead {
		_, _ = w.Write(b)
	}
}

func writeStatus(w http.ResponseWriter, err *apierrors.StatusError) {
	st := err.ErrStatus
	st.TypeMeta = metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}
	writeJSON(w, nil, int(st.Code), "application/json", &st)
}

func forbidden(attrs authorizer.Attributes, reason string) *apierrors.StatusError {
	msg := fmt.Sprintf("User %q cannot %s path %q", attrs.GetUser().GetName(), attrs.GetVerb(), attrs.GetPath())
	if attrs.IsResourceRequest() {
		msg = fmt.Sprintf("User %q cannot %s resource %q in API group %q at the cluster scope", attrs.GetUser().GetName(), attrs.GetVerb(),
			attrs.GetResource(), attrs.GetAPIGroup())
	}
	if reason != "" {
		msg += ": " + reason
	}
	return &apierrors.StatusError{ErrStatus: metav1.Status{Status: metav1.StatusFailure, Code: http.StatusForbidden, Reason: metav1.StatusReasonForbidden, Message: msg}}
}

func attributesOf(u user.Info, info *apirequest.RequestInfo) authorizer.AttributesRecord {
	return authorizer.AttributesRecord{User: u, Verb: info.Verb, Namespace: info.Namespace, APIGroup: info.APIGroup, APIVersion: info.APIVersion,
		Resource: info.Resource, Subresource: info.Subresource, Name: info.Name, ResourceRequest: info.IsResourceRequest, Path: info.Path}
}
