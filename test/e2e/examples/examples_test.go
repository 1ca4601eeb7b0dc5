package examples

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/polycrate/polycrate-operator/api/v1alpha1"
	"github.com/polycrate/polycrate-operator/internal/emulator"
	"github.com/polycrate/polycrate-operator/internal/names"
	"github.com/polycrate/polycrate-operator/internal/testutil/specs"
)

// seedExamples are the seed's Ingress examples 1, 3, 4, 5, 7, 8 and 9 as the
// documentation prints them, with one line added to each: the port of the local
// backend (polycrate_endpoint_port), which stands in for the ingress
// controller's 443. Example 2 and 6 add nothing these do not cover (a path; a
// 300 s interval that would hold the suite for five minutes).
const seedExamples = `
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: webapp
  namespace: production
  annotations:
    # Opt-in für Endpoint-Monitoring (Pflicht im annotation-Mode)
    polycrate_endpoint_monitor: "true"
    polycrate_endpoint_port: "{{PORT}}"
spec:
  ingressClassName: nginx
  rules:
    - host: app.example.com
      http:
        paths:
          - path: /
            pathType: Prefix
            backend:
              service:
                name: webapp
                port:
                  number: 80
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: payment-gateway
  namespace: production
  annotations:
    polycrate_endpoint_monitor: "true"
    # Kritischer Service: Häufigere Checks
    polycrate_endpoint_path: "/health/ready"
    polycrate_endpoint_interval: "30"
    polycrate_endpoint_timeout: "10"
    polycrate_endpoint_expected_status: "200"
    polycrate_endpoint_port: "{{PORT}}"
spec:
  ingressClassName: nginx
  tls:
    - hosts:
        - pay.example.com
      secretName: payment-tls
  rules:
    - host: pay.example.com
      http:
        paths:
          - path: /
            pathType: Prefix
            backend:
              service:
                name: payment-api
                port:
                  number: 443
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: database-api
  namespace: production
  annotations:
    polycrate_endpoint_monitor: "true"
    polycrate_endpoint_path: "/health/deep"
    polycrate_endpoint_expected_status: "200"
    # Prüft ob "database":"connected" im Response-Body enthalten ist
    endpoints.polycrate.io/expected-body: '"database":"connected"'
    polycrate_endpoint_port: "{{PORT}}"
spec:
  ingressClassName: nginx
  tls:
    - hosts:
        - db-api.example.com
      secretName: db-api-tls
  rules:
    - host: db-api.example.com
      http:
        paths:
          - path: /
            pathType: Prefix
            backend:
              service:
                name: db-api
                port:
                  number: 8080
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: internal-admin
  namespace: kube-system
  annotations:
    # Diesen Ingress NICHT monitoren (in beiden Modi wirksam)
    polycrate_endpoint_monitor: "false"
spec:
  ingressClassName: nginx
  rules:
    - host: admin.internal.local
      http:
        paths:
          - path: /
            pathType: Prefix
            backend:
              service:
                name: admin-dashboard
                port:
                  number: 80
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: legacy-app
  namespace: production
  annotations:
    polycrate_endpoint_monitor: "true"
    polycrate_endpoint_path: "/"
    # Redirect ist OK (z.B. HTTP→HTTPS oder /→/login)
    polycrate_endpoint_expected_status: "302"
    polycrate_endpoint_port: "{{PORT}}"
spec:
  ingressClassName: nginx
  rules:
    - host: legacy.example.com
      http:
        paths:
          - path: /
            pathType: Prefix
            backend:
              service:
                name: legacy-app
                port:
                  number: 80
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: main-api
  namespace: production
  labels:
    app: main-api
    environment: production
  annotations:
    # === Polycrate Endpoint Discovery ===
    polycrate_endpoint_monitor: "true"
    polycrate_endpoint_path: "/api/v1/health"
    polycrate_endpoint_timeout: "15"
    polycrate_endpoint_interval: "30"
    polycrate_endpoint_expected_status: "200"
    polycrate_endpoint_port: "{{PORT}}"

    # === Nginx Ingress Controller ===
    nginx.ingress.kubernetes.io/proxy-body-size: "50m"
    nginx.ingress.kubernetes.io/proxy-read-timeout: "60"

    # === Cert-Manager ===
    cert-manager.io/cluster-issuer: "letsencrypt-prod"
spec:
  ingressClassName: nginx
  tls:
    - hosts:
        - api.mycompany.com
      secretName: api-tls-cert
  rules:
    - host: api.mycompany.com
      http:
        paths:
          - path: /api
            pathType: Prefix
            backend:
              service:
                name: api-service
                port:
                  number: 8080
          - path: /docs
            pathType: Prefix
            backend:
              service:
                name: docs-service
                port:
                  number: 80
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: multi-service-platform
  namespace: production
  annotations:
    polycrate_endpoint_monitor: "true"
    # Fallback: gilt für alle Hosts ohne Eintrag in host_config
    polycrate_endpoint_path: "/health"
    polycrate_endpoint_expected_status: "200"
    polycrate_endpoint_port: "{{PORT}}"
    # Per-Host-Overrides
    polycrate_endpoint_host_config: |
      {
        "api.example.com": {
          "path": "/api/health",
          "expected_status": [200]
        },
        "events.example.com": {
          "path": "/health",
          "expected_status": [202]
        },
        "data.example.com": {
          "path": "/readyz",
          "expected_status": [200],
          "timeout": 10
        }
      }
spec:
  ingressClassName: nginx
  tls:
    - hosts:
        - api.example.com
        - events.example.com
        - data.example.com
        - booking.example.com
      secretName: platform-tls
  rules:
    - host: api.example.com
      http:
        paths:
          - path: /
            pathType: Prefix
            backend:
              service:
                name: api-service
                port:
                  number: 8080
    - host: events.example.com
      http:
        paths:
          - path: /
            pathType: Prefix
            backend:
              service:
                name: events-service
                port:
                  number: 80
    - host: data.example.com
      http:
        paths:
          - path: /
            pathType: Prefix
            backend:
              service:
                name: data-service
                port:
                  number: 8080
    - host: booking.example.com
      http:
        paths:
          - path: /
            pathType: Prefix
            backend:
              service:
                name: booking-service
                port:
                  number: 80
`

// expectation is what a user sees of one example host: the API endpoint's
// check (the seed's "Ergebnis"), the answer of a healthy backend, and the
// failure once it is broken.
type expectation struct {
	example           string
	host              string
	path              string
	expected          int
	timeout, interval int
	upCode            int
	downError         string
	downCode          int
}

var expectations = []expectation{
	{"1 (minimal)", "app.example.com", "/", 200, 5, 60, 200, "unexpected_status_code", 503},
	{"3 (critical, short interval)", "pay.example.com", "/health/ready", 200, 10, 30, 200, "unexpected_status_code", 503},
	{"4 (body validation)", "db-api.example.com", "/health/deep", 200, 5, 60, 200, "body_mismatch", 200},
	{"7 (302 expected)", "legacy.example.com", "/", 302, 5, 60, 302, "unexpected_status_code", 503},
	{"8 (production set-up)", "api.mycompany.com", "/api/v1/health", 200, 15, 30, 200, "unexpected_status_code", 503},
	{"9 api (host_config)", "api.example.com", "/api/health", 200, 5, 60, 200, "unexpected_status_code", 503},
	{"9 events (host_config 202)", "events.example.com", "/health", 202, 5, 60, 202, "unexpected_status_code", 200},
	{"9 data (host_config timeout 10)", "data.example.com", "/readyz", 200, 10, 60, 200, "unexpected_status_code", 503},
	{"9 booking (fallback)", "booking.example.com", "/health", 200, 5, 60, 200, "unexpected_status_code", 503},
}

// crName is the Endpoint CR of a host, as the operator names it (the seed's
// app-example-com; a host with hyphens gets a hash so that no two hosts share a name).
func crName(host string) string { return names.Endpoint(host) }

func endpointCR(host string) func() (*v1.Endpoint, error) {
	return func() (*v1.Endpoint, error) {
		ep := &v1.Endpoint{}
		err := k8s.Get(ctx, client.ObjectKey{Namespace: "production", Name: crName(host)}, ep)
		return ep, err
	}
}

// apiEndpoint reads an endpoint from the API as any client would.
func apiEndpoint(id string) (map[string]any, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, apiURL+"/api/v1/endpoints/"+id+"/", nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+emulator.DevAgentToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET endpoint %s: %s", id, resp.Status)
	}
	out := map[string]any{}
	return out, json.NewDecoder(resp.Body).Decode(&out)
}

// probeSuccess is the binary's probe_success for an Endpoint CR, from a real
// scrape of its /metrics (-1: no series; an error: the scrape failed).
func probeSuccess(name string) (float64, error) {
	resp, err := http.Get(metricsURL)
	if err != nil {
		return 0, err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("scrape: %s", resp.Status)
	}
	want := []string{`endpoint="` + name + `"`, `endpoint_namespace="production"`}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "probe_success{") || !strings.Contains(line, want[0]) || !strings.Contains(line, want[1]) {
			continue
		}
		return strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
	}
	return -1, sc.Err()
}

// camel is a failure name as the Available condition's reason (body_mismatch → BodyMismatch).
func camel(s string) string {
	var b strings.Builder
	for _, part := range strings.Split(s, "_") {
		if part != "" {
			b.WriteString(strings.ToUpper(part[:1]) + part[1:])
		}
	}
	return b.String()
}

var _ = Describe("the seed's Ingress examples, as a user sees them", Ordered, func() {
	ids := map[string]string{}

	BeforeAll(func() {
		manifests := strings.ReplaceAll(seedExamples, "{{PORT}}", strconv.Itoa(backend.port))
		dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader([]byte(manifests)), 4096)
		for {
			u := &unstructured.Unstructured{}
			if err := dec.Decode(&u.Object); err != nil {
				Expect(err.Error()).To(Equal("EOF"))
				break
			}
			// kubectl apply's default: unknown or duplicate fields are refused.
			Expect(k8s.Create(ctx, u, client.FieldValidation(metav1.FieldValidationStrict))).To(Succeed(), u.GetName())
		}
	})

	It("syncs every example host to the API with the seed's check (path, expected status, timeout, interval, TLS)", func() {
		Expect(crName("app.example.com")).To(Equal("app-example-com"), "the seed's name of example 1's CR")
		for _, e := range expectations {
			Eventually(func(g Gomega) {
				ep, err := endpointCR(e.host)()
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(ep.Status.APIID).NotTo(BeEmpty())
				ids[e.host] = ep.Status.APIID
			}, specs.Timeout, specs.Poll).Should(Succeed(), "example %s: no synced Endpoint CR %s", e.example, crName(e.host))
			a, err := apiEndpoint(ids[e.host])
			Expect(err).NotTo(HaveOccurred())
			Expect(a).To(And(HaveKeyWithValue("kind", "http"), HaveKeyWithValue("remote_address", e.host),
				HaveKeyWithValue("remote_port", BeNumerically("==", backend.port))), e.example)
			Expect(a["spec"]).To(HaveKeyWithValue("http", And(
				HaveKeyWithValue("path", e.path), HaveKeyWithValue("tls", true),
				HaveKeyWithValue("expected_status_code", BeNumerically("==", e.expected)),
				HaveKeyWithValue("timeout", BeNumerically("==", e.timeout)),
				HaveKeyWithValue("interval", BeNumerically("==", e.interval)))), e.example)
		}
		// Example 5: no Endpoint for an Ingress that opts out.
		list := &v1.EndpointList{}
		Expect(k8s.List(ctx, list)).To(Succeed())
		for _, ep := range list.Items {
			Expect(ep.Spec.RemoteAddress).NotTo(Equal("admin.internal.local"), "example 5 opted out")
		}
	})

	It("reports every healthy backend up: the API's state, the CR's status and condition, probe_success", func() {
		for _, e := range expectations {
			Eventually(func(g Gomega) {
				ep, err := endpointCR(e.host)()
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(ep.Status.Monitoring).NotTo(BeNil())
				g.Expect(ep.Status.Monitoring.State).To(Equal("up"), "%+v", ep.Status.Monitoring)
				g.Expect(ep.Status.Monitoring.StatusCode).To(BeEquivalentTo(e.upCode))
				g.Expect(ep.Status.Monitoring.URL).To(Equal(fmt.Sprintf("https://%s:%d%s", e.host, backend.port, e.path)))
				g.Expect(meta.IsStatusConditionTrue(ep.Status.Conditions, v1.ConditionAvailable)).To(BeTrue())
				a, err := apiEndpoint(ids[e.host])
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(a["state"]).To(Equal("OK"), "state_reason %v", a["state_reason"])
				g.Expect(probeSuccess(crName(e.host))).To(Equal(1.0))
			}, specs.Timeout, specs.Poll).Should(Succeed(), "example %s", e.example)
		}
	})

	It("reports every broken backend down with the right reason, and a Warning event", func() {
		for _, e := range expectations {
			backend.breakHost(e.host)
		}
		// The next check of each comes within its interval (30 or 60 s).
		for _, e := range expectations {
			Eventually(func(g Gomega) {
				ep, err := endpointCR(e.host)()
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(ep.Status.Monitoring).NotTo(BeNil())
				g.Expect(ep.Status.Monitoring.State).To(Equal("down"))
				g.Expect(ep.Status.Monitoring.ErrorName).To(Equal(e.downError))
				g.Expect(ep.Status.Monitoring.StatusCode).To(BeEquivalentTo(e.downCode))
				c := meta.FindStatusCondition(ep.Status.Conditions, v1.ConditionAvailable)
				g.Expect(c).NotTo(BeNil())
				g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
				g.Expect(c.Reason).To(Equal(camel(e.downError)))
				a, err := apiEndpoint(ids[e.host])
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(a["state"]).To(Equal("CRITICAL"))
				g.Expect(a["state_reason"]).To(ContainSubstring(e.downError))
				g.Expect(probeSuccess(crName(e.host))).To(Equal(0.0))
			}, time.Duration(e.interval+e.timeout+30)*time.Second, 250*time.Millisecond).Should(Succeed(), "example %s", e.example)
			specs.ExpectEvent(k8s, "production", crName(e.host), "Warning", v1.ReasonEndpointDown)
		}
	})
})
