package monitoring

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/polycrate/polycrate-operator/internal/checks/probe"
	"github.com/polycrate/polycrate-operator/internal/polycrate"
)

// scrape serves reg as controller-runtime's metrics server does (an error in
// any collector fails the scrape) and returns the answer.
func scrape(t *testing.T, reg *prometheus.Registry) (int, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorHandling: promhttp.HTTPErrorOnError}).
		ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	return rec.Code, rec.Body.String()
}

// TestSeriesLabelsAreUnique: endpoints that share a name in the API (a person
// made two; an Ingress host and an API-defined endpoint share it) get one
// series each, named by their CRs; without a CR, by the mirror's name, made
// unique with the id where even that repeats.
func TestSeriesLabelsAreUnique(t *testing.T) {
	org := map[string]string{"name": "acme-corp"}
	list := []polycrate.AgentEndpoint{
		{ID: "1111111100000001", Name: "shop", Organization: org},
		{ID: "2222222200000002", Name: "shop", Organization: org},
		{ID: "3333333300000003", Name: "shop", Organization: org},
		{ID: "4444444400000004", Name: "shop", Organization: org},
		{ID: "4444444400000005", Name: "shop", Organization: org},
	}
	crs := map[string]crRef{
		"1111111100000001": {namespace: "production", name: "shop-example-com"},
		"2222222200000002": {namespace: "polycrate", name: "api-shop-22222222"},
	}
	got := seriesLabelsOf(list, crs)
	want := map[string]seriesLabels{
		"1111111100000001": {"production", "shop-example-com", "acme-corp"},
		"2222222200000002": {"polycrate", "api-shop-22222222", "acme-corp"},
		"3333333300000003": {"", "api-shop-33333333", "acme-corp"},
		"4444444400000004": {"", "api-shop-44444444-4444444400000004", "acme-corp"},
		"4444444400000005": {"", "api-shop-44444444-4444444400000005", "acme-corp"},
	}
	for id, w := range want {
		if got[id] != w {
			t.Errorf("%s: %+v, want %+v", id, got[id], w)
		}
	}
}

// TestCollectorNeverFailsAScrape: even two records with one label set (which
// the agent never gives, but a relabelling could leave for a moment) make a
// scrape that answers 200 with one series, never the registry's 500 that
// loses every metric of the operator.
func TestCollectorNeverFailsAScrape(t *testing.T) {
	c := &probeCollector{records: map[string]*probeRecord{}}
	same := seriesLabels{namespace: "", endpoint: "twin", organization: "acme-corp"}
	c.records["a"] = &probeRecord{seriesLabels: same, kind: "http", success: true}
	c.records["b"] = &probeRecord{seriesLabels: same, kind: "http", success: false}
	c.records["c"] = &probeRecord{seriesLabels: seriesLabels{"shop", "twin", "acme-corp"}, kind: "http", success: true, redirects: 2}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	code, body := scrape(t, reg)
	if code != http.StatusOK {
		t.Fatalf("scrape answered %d:\n%s", code, body)
	}
	if n := strings.Count(body, "probe_success{"); n != 2 {
		t.Fatalf("%d probe_success series, want 2 (one per label set):\n%s", n, body)
	}
	if !strings.Contains(body, `probe_http_redirects{endpoint="twin",endpoint_namespace="shop",organization="acme-corp"} 2`) {
		t.Fatalf("no redirect count:\n%s", body)
	}
}

// TestObserveUsesTheAssignmentsLabels: a check's series carry the labels the
// agent gave the endpoint, and relabel moves them when they change.
func TestObserveUsesTheAssignmentsLabels(t *testing.T) {
	t.Cleanup(func() { forget("x1"); forget("x2") })
	a1 := assignment{target: probe.Target{ID: "x1", Kind: "http"}, labels: seriesLabels{"ns", "one", "org"}}
	a2 := assignment{target: probe.Target{ID: "x2", Kind: "http"}, labels: seriesLabels{"ns", "two", "org"}}
	observe(a1, probe.Outcome{})
	observe(a2, probe.Outcome{})
	// x1's CR goes away and x2 takes over its name: without relabel, "one" would be there twice.
	relabel(map[string]seriesLabels{"x1": {"", "api-one-x1", "org"}, "x2": {"ns", "one", "org"}})
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(probes)
	code, body := scrape(t, reg)
	if code != http.StatusOK || !strings.Contains(body, `probe_success{endpoint="api-one-x1",endpoint_namespace="",organization="org"}`) ||
		!strings.Contains(body, `probe_success{endpoint="one",endpoint_namespace="ns",organization="org"}`) || strings.Contains(body, `"two"`) {
		t.Fatalf("scrape %d:\n%s", code, body)
	}
}
