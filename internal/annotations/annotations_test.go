package annotations

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

type want struct {
	host     string
	path     string
	tls      bool
	port     int
	timeout  int
	interval int
	status   []int
	body     string
}

func checkOf(t *testing.T, ann map[string]string, host string, src Source) Check {
	t.Helper()
	s, probs := Parse(ann)
	if len(probs) > 0 {
		t.Fatalf("unexpected problems: %v", probs)
	}
	return s.For(host, src)
}

func assertCheck(t *testing.T, got Check, w want) {
	t.Helper()
	if got.Path != w.path || got.TLS != w.tls || got.Port != w.port || got.Timeout != w.timeout || got.Interval != w.interval ||
		!slices.Equal(got.ExpectedStatus, w.status) || got.ExpectedBody != w.body {
		t.Fatalf("%s: got %+v, want %+v", w.host, got, w)
	}
}

// The seed's Beispiele 1–9, with their annotations exactly as the seed writes them.
func TestSeedExamples(t *testing.T) {
	ingress := Source{} // no listener: the rule's defaults are TLS on, port 443
	for _, tc := range []struct {
		name string
		ann  map[string]string
		want want
	}{
		{"Beispiel 1: minimal (annotation mode)", map[string]string{Monitor: "true"},
			want{"app.example.com", "/", true, 443, 5, 60, []int{200}, ""}},
		{"Beispiel 2: custom path", map[string]string{Monitor: "true", Path: "/api/health"},
			want{"api.example.com", "/api/health", true, 443, 5, 60, []int{200}, ""}},
		{"Beispiel 3: critical service", map[string]string{Monitor: "true", Path: "/health/ready", Interval: "30", Timeout: "10", ExpectedStatus: "200"},
			want{"pay.example.com", "/health/ready", true, 443, 10, 30, []int{200}, ""}},
		{"Beispiel 4: body validation", map[string]string{Monitor: "true", Path: "/health/deep", ExpectedStatus: "200", ExpectedBody: `"database":"connected"`},
			want{"db-api.example.com", "/health/deep", true, 443, 5, 60, []int{200}, `"database":"connected"`}},
		{"Beispiel 6: slow backend", map[string]string{Monitor: "true", Path: "/api/health", Timeout: "120", Interval: "300"},
			want{"reports.example.com", "/api/health", true, 443, 120, 300, []int{200}, ""}},
		{"Beispiel 7: redirects allowed", map[string]string{Monitor: "true", Path: "/", ExpectedStatus: "302"},
			want{"legacy.example.com", "/", true, 443, 5, 60, []int{302}, ""}},
		{"Beispiel 8: production setup", map[string]string{Monitor: "true", Path: "/api/v1/health", Timeout: "15", Interval: "30", ExpectedStatus: "200",
			"nginx.ingress.kubernetes.io/proxy-body-size": "50m", "cert-manager.io/cluster-issuer": "letsencrypt-prod"},
			want{"api.mycompany.com", "/api/v1/health", true, 443, 15, 30, []int{200}, ""}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if !Selected(ModeAnnotation, tc.ann) || !Selected(ModeAuto, tc.ann) {
				t.Fatal("not selected")
			}
			assertCheck(t, checkOf(t, tc.ann, tc.want.host, ingress), tc.want)
		})
	}
	t.Run("Beispiel 5: excluded in both modes", func(t *testing.T) {
		ann := map[string]string{Monitor: "false"}
		if Selected(ModeAnnotation, ann) || Selected(ModeAuto, ann) {
			t.Fatal("an Ingress with polycrate_endpoint_monitor=false was selected")
		}
	})
}

// Beispiel 9: exactly the seed's result table.
func TestSeedExample9PerHost(t *testing.T) {
	ann := map[string]string{
		Monitor:        "true",
		Path:           "/health",
		ExpectedStatus: "200",
		HostConfig: `{
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
`,
	}
	for _, w := range []want{
		{"api.example.com", "/api/health", true, 443, 5, 60, []int{200}, ""},
		{"events.example.com", "/health", true, 443, 5, 60, []int{202}, ""},
		{"data.example.com", "/readyz", true, 443, 10, 60, []int{200}, ""},
		{"booking.example.com", "/health", true, 443, 5, 60, []int{200}, ""},
	} {
		t.Run(w.host, func(t *testing.T) { assertCheck(t, checkOf(t, ann, w.host, Source{}), w) })
	}
}

func TestSelectedModes(t *testing.T) {
	for _, tc := range []struct {
		ann              map[string]string
		annotation, auto bool
	}{
		{map[string]string{}, false, true},
		{map[string]string{Monitor: "true"}, true, true},
		{map[string]string{Monitor: "TRUE "}, true, true},
		{map[string]string{Monitor: "false"}, false, false},
		{map[string]string{Monitor: "yes"}, false, true},
		{map[string]string{LegacyEnabled: "true"}, true, true},
		{map[string]string{LegacyIgnore: "true"}, false, false},
		{map[string]string{LegacyEnabled: "true", Monitor: "false"}, false, false}, // canonical wins
		{map[string]string{LegacyIgnore: "true", Monitor: "true"}, true, true},     // canonical wins
	} {
		if got := Selected(ModeAnnotation, tc.ann); got != tc.annotation {
			t.Errorf("annotation mode %v: %v", tc.ann, got)
		}
		if got := Selected(ModeAuto, tc.ann); got != tc.auto {
			t.Errorf("auto mode %v: %v", tc.ann, got)
		}
	}
}

func TestEveryAnnotationAndAlias(t *testing.T) {
	canonical := map[string]string{Path: "/a", Timeout: "7", Interval: "45", ExpectedStatus: "200, 204 ,200", TLS: "false", Port: "8443",
		ExpectedBody: "ok", K8sAppName: " shop ", BYOA: "true"}
	s, probs := Parse(canonical)
	if len(probs) > 0 {
		t.Fatal(probs)
	}
	c := s.For("x.example.com", Source{})
	assertCheck(t, c, want{"x.example.com", "/a", false, 8443, 7, 45, []int{200, 204}, "ok"})
	if s.K8sAppName != "shop" || !s.BYOA {
		t.Fatalf("app %q byoa %v", s.K8sAppName, s.BYOA)
	}

	legacy := map[string]string{LegacyPath: "/b", LegacyTimeout: "8", LegacyInterval: "90", LegacyExpectedStatus: "301", LegacyTLS: "false", LegacyPort: "80"}
	s, _ = Parse(legacy)
	assertCheck(t, s.For("x", Source{}), want{"x", "/b", false, 80, 8, 90, []int{301}, ""})

	// Canonical wins over the alias, field by field.
	both := map[string]string{}
	for k, v := range legacy {
		both[k] = v
	}
	for k, v := range canonical {
		both[k] = v
	}
	s, _ = Parse(both)
	assertCheck(t, s.For("x", Source{}), want{"x", "/a", false, 8443, 7, 45, []int{200, 204}, "ok"})
}

func TestInvalidValuesFallBackWithAProblem(t *testing.T) {
	for _, tc := range []struct {
		ann        map[string]string
		annotation string
	}{
		{map[string]string{Timeout: "30s"}, Timeout},
		{map[string]string{Timeout: "0"}, Timeout},
		{map[string]string{Interval: "-5"}, Interval},
		{map[string]string{Port: "70000"}, Port},
		{map[string]string{Port: "https"}, Port},
		{map[string]string{TLS: "maybe"}, TLS},
		{map[string]string{ExpectedStatus: "200,abc"}, ExpectedStatus},
		{map[string]string{ExpectedStatus: "42"}, ExpectedStatus},
		{map[string]string{Path: "health"}, Path},
		{map[string]string{Path: "  "}, Path},
		{map[string]string{LegacyPort: "0"}, LegacyPort},
		{map[string]string{BYOA: "sure"}, BYOA},
		{map[string]string{HostConfig: "{not json"}, HostConfig},
		{map[string]string{HostConfig: `["a.example.com"]`}, HostConfig},
	} {
		s, probs := Parse(tc.ann)
		if len(probs) != 1 || probs[0].Annotation != tc.annotation {
			t.Errorf("%v: problems %v", tc.ann, probs)
			continue
		}
		if !strings.Contains(probs[0].String(), tc.annotation) || !strings.Contains(probs[0].String(), "the default is used") {
			t.Errorf("problem text %q", probs[0].String())
		}
		// Defaults everywhere.
		assertCheck(t, s.For("x", Source{}), want{"x", "/", true, 443, 5, 60, []int{200}, ""})
	}
}

func TestHostConfigDetails(t *testing.T) {
	ann := map[string]string{Path: "/fallback", HostConfig: `{"A.Example.com.": {"tls": false, "port": 80, "expected_status": 204},
		"b.example.com": {"port": 99999, "path": "/b"}, "c.example.com": {"unknown": 1}}`}
	s, probs := Parse(ann)
	if len(probs) != 2 {
		t.Fatalf("want 2 problems (b's port, c's unknown field): %v", probs)
	}
	assertCheck(t, s.For("a.example.com", Source{}), want{"a.example.com", "/fallback", false, 80, 5, 60, []int{204}, ""})
	assertCheck(t, s.For("b.example.com", Source{}), want{"b.example.com", "/b", true, 443, 5, 60, []int{200}, ""})
	assertCheck(t, s.For("c.example.com", Source{}), want{"c.example.com", "/fallback", true, 443, 5, 60, []int{200}, ""})
}

func TestPrecedenceWithAGatewayListener(t *testing.T) {
	http := Source{Listener: &Listener{TLS: false, Port: 80}, Path: "/shop"}
	// The listener and the route's PathPrefix beat the defaults ...
	assertCheck(t, checkOf(t, map[string]string{}, "shop.acme.example", http), want{"shop.acme.example", "/shop", false, 80, 5, 60, []int{200}, ""})
	// ... annotations beat the listener ...
	assertCheck(t, checkOf(t, map[string]string{TLS: "true", Port: "8443", Path: "/readyz"}, "shop.acme.example", http),
		want{"shop.acme.example", "/readyz", true, 8443, 5, 60, []int{200}, ""})
	// ... and the per-host config beats the annotations.
	assertCheck(t, checkOf(t, map[string]string{TLS: "true", HostConfig: `{"shop.acme.example": {"tls": false, "port": 8080}}`}, "shop.acme.example", http),
		want{"shop.acme.example", "/shop", false, 8080, 5, 60, []int{200}, ""})
}

func TestForDoesNotAlias(t *testing.T) {
	s, _ := Parse(map[string]string{ExpectedStatus: "200,201"})
	c := s.For("x", Source{})
	c.ExpectedStatus[0] = 999
	if !reflect.DeepEqual(s.For("x", Source{}).ExpectedStatus, []int{200, 201}) {
		t.Fatal("For shares slices with the settings")
	}
}

func FuzzParse(f *testing.F) {
	f.Add("true", "/health", "5", "60", "200,204", "true", "443", `{"a.example.com": {"path": "/x", "expected_status": [200]}}`, "a.example.com")
	f.Add("", "", "", "", "", "", "", "{", "")
	f.Add("false", "x", "-1", "9999999999", "abc", "maybe", "0", `{"a": {"port": 1e9}}`, "A.")
	f.Fuzz(func(t *testing.T, monitor, path, timeout, interval, status, tls, port, hostConfig, host string) {
		ann := map[string]string{Monitor: monitor, Path: path, Timeout: timeout, Interval: interval, ExpectedStatus: status, TLS: tls, Port: port, HostConfig: hostConfig}
		s, _ := Parse(ann)
		c := s.For(host, Source{})
		if c.Port < 1 || c.Port > 65535 || c.Timeout < 1 || c.Interval < 1 || len(c.ExpectedStatus) == 0 || !strings.HasPrefix(c.Path, "/") {
			t.Fatalf("an invalid check got through: %+v", c)
		}
		for _, code := range c.ExpectedStatus {
			if code < 100 || code > 599 {
				t.Fatalf("status %d", code)
			}
		}
		_ = Selected(ModeAuto, ann)
	})
}

// What a source carries into the CR and the API stays bounded: an oversized,
// non-UTF-8 or control-character path or expected body is a Problem (one Warning
// event), and the default is used.
func TestPathAndBodyAreBounded(t *testing.T) {
	long := "/" + strings.Repeat("x", MaxPathBytes)
	for _, tc := range []struct {
		name string
		ann  map[string]string
		path string
		body string
		prob string
	}{
		{"a path at the limit", map[string]string{Path: long[:MaxPathBytes]}, long[:MaxPathBytes], "", ""},
		{"a path over the limit", map[string]string{Path: long}, "/", "", Path},
		{"a non-UTF-8 path", map[string]string{Path: "/caf\xe9"}, "/", "", Path},
		{"a path with a control character", map[string]string{Path: "/a\x00b"}, "/", "", Path},
		{"a per-host path over the limit", map[string]string{HostConfig: `{"h.example.com": {"path": "` + long + `"}}`}, "/", "", HostConfig},
		{"a body at the limit", map[string]string{ExpectedBody: strings.Repeat("b", MaxExpectedBodyBytes)}, "/", strings.Repeat("b", MaxExpectedBodyBytes), ""},
		{"a 120 KB body", map[string]string{ExpectedBody: strings.Repeat("b", 120<<10)}, "/", "", ExpectedBody},
		{"a non-UTF-8 body", map[string]string{ExpectedBody: "\xff\xfe"}, "/", "", ExpectedBody},
		{"a multi-line body", map[string]string{ExpectedBody: "\"status\":\n\"ok\""}, "/", "\"status\":\n\"ok\"", ""},
		{"a body with a NUL", map[string]string{ExpectedBody: "a\x00b"}, "/", "", ExpectedBody},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, probs := Parse(tc.ann)
			c := s.For("h.example.com", Source{})
			if c.Path != tc.path || c.ExpectedBody != tc.body {
				t.Fatalf("path %.40q body %.40q, want %.40q %.40q", c.Path, c.ExpectedBody, tc.path, tc.body)
			}
			switch {
			case tc.prob == "" && len(probs) > 0:
				t.Fatalf("problems %v", probs)
			case tc.prob != "" && (len(probs) != 1 || probs[0].Annotation != tc.prob):
				t.Fatalf("problems %v, want one for %s", probs, tc.prob)
			}
			for _, p := range probs {
				if msg := p.String(); len(msg) > 400 || !utf8.ValidString(msg) {
					t.Fatalf("problem message of %d bytes, valid UTF-8 %v", len(msg), utf8.ValidString(msg))
				}
			}
		})
	}
	if CheckSourcePath(long) != "" || CheckSourcePath("/ok") != "/ok" {
		t.Fatal("CheckSourcePath")
	}
}

func TestSummary(t *testing.T) {
	var probs []Problem
	for i := range 30 {
		probs = append(probs, Problem{Annotation: fmt.Sprintf("a%d", i), Value: strings.Repeat("v", 100), Reason: "bad"})
	}
	s := Summary(probs, 1024)
	if len(s) > 1024 || !strings.Contains(s, "annotation a0=") || !strings.Contains(s, "more)") || !utf8.ValidString(s) {
		t.Fatalf("summary of %d bytes: %s", len(s), s)
	}
	if one := Summary(probs[:1], 1024); one != probs[0].String() {
		t.Fatalf("one problem: %q", one)
	}
}
