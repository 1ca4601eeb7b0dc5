// Package annotations parses the polycrate_* annotations of Ingresses and
// HTTPRoutes (and their deprecated endpoints.polycrate.io/* aliases) into the
// health check of each host. It is pure: no Kubernetes client, no API. Invalid
// values are returned as Problems (for a Warning event on the source) and the
// default is used instead; discovery of the other hosts continues.
package annotations

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// The canonical annotations (seed 002 "Alle verfügbaren Annotationen", ab 0.38.0).
const (
	Monitor        = "polycrate_endpoint_monitor"
	Path           = "polycrate_endpoint_path"
	Timeout        = "polycrate_endpoint_timeout"
	Interval       = "polycrate_endpoint_interval"
	ExpectedStatus = "polycrate_endpoint_expected_status"
	TLS            = "polycrate_endpoint_tls"
	Port           = "polycrate_endpoint_port"
	HostConfig     = "polycrate_endpoint_host_config"
	K8sAppName     = "polycrate_k8sapp_name"
	BYOA           = "polycrate_k8sapp_byoa"
	// ExpectedBody has no canonical form: the seed's Beispiel 4 uses this name.
	ExpectedBody = "endpoints.polycrate.io/expected-body"
)

// The deprecated aliases; the canonical annotation wins when both are set.
const (
	LegacyEnabled        = "endpoints.polycrate.io/enabled"
	LegacyIgnore         = "endpoints.polycrate.io/ignore"
	LegacyPath           = "endpoints.polycrate.io/path"
	LegacyTimeout        = "endpoints.polycrate.io/timeout"
	LegacyInterval       = "endpoints.polycrate.io/interval"
	LegacyExpectedStatus = "endpoints.polycrate.io/expected-status"
	LegacyTLS            = "endpoints.polycrate.io/tls"
	LegacyPort           = "endpoints.polycrate.io/port"
)

// Defaults of the annotation table.
const (
	DefaultPath     = "/"
	DefaultTimeout  = 5
	DefaultInterval = 60
	DefaultPort     = 443
	DefaultTLS      = true
)

// Bounds of what a check carries: a path no HTTP client or server would refuse,
// and an expected body that is a substring to look for, not a page to compare.
// Longer values are refused as a Problem (the default is used), so what reaches
// the CR and the API stays bounded whatever the annotation holds.
const (
	MaxPathBytes         = 2048
	MaxExpectedBodyBytes = 1024
)

// DefaultExpectedStatus is the annotation table's default expected status.
var DefaultExpectedStatus = []int{200}

// Modes of endpoint discovery.
const (
	ModeAnnotation = "annotation"
	ModeAuto       = "auto"
)

// Problem is an annotation value that could not be used.
type Problem struct {
	Annotation string
	Value      string
	Reason     string
}

// Summary joins problems into one message of at most limit bytes; the ones that
// do not fit are counted at the end.
func Summary(problems []Problem, limit int) string {
	var b strings.Builder
	for i, p := range problems {
		msg := p.String()
		if i > 0 {
			msg = "; " + msg
		}
		more := fmt.Sprintf(" (+%d more)", len(problems)-i)
		if b.Len()+len(msg) > limit-len(more) && i > 0 {
			b.WriteString(more)
			break
		}
		b.WriteString(msg)
	}
	out := b.String()
	if len(out) > limit {
		out = strings.ToValidUTF8(out[:limit-3], "") + "…"
	}
	return out
}

func (p Problem) String() string {
	v := p.Value
	if len(v) > 80 {
		v = strings.ToValidUTF8(v[:80], "") + "…"
	}
	v = strings.ToValidUTF8(v, "\uFFFD")
	return fmt.Sprintf("annotation %s=%q: %s; the default is used", p.Annotation, v, p.Reason)
}

// Selected reports whether a source takes part in endpoint discovery: in mode
// "annotation" only with polycrate_endpoint_monitor "true", in mode "auto" unless
// it is "false". "false" excludes in both modes. The deprecated
// endpoints.polycrate.io/enabled ("true") and …/ignore ("true") count as "true"
// and "false" where the canonical annotation is absent.
func Selected(mode string, ann map[string]string) bool {
	v := monitorValue(ann)
	if mode == ModeAuto {
		return v != "false"
	}
	return v == "true"
}

func monitorValue(ann map[string]string) string {
	if v, ok := ann[Monitor]; ok {
		return strings.ToLower(strings.TrimSpace(v))
	}
	if strings.EqualFold(strings.TrimSpace(ann[LegacyIgnore]), "true") {
		return "false"
	}
	if v, ok := ann[LegacyEnabled]; ok {
		return strings.ToLower(strings.TrimSpace(v))
	}
	return ""
}

// HostOverride is one host's entry of polycrate_endpoint_host_config; nil fields
// fall back to the source-wide values.
type HostOverride struct {
	Path           *string
	ExpectedStatus []int
	Timeout        *int
	Interval       *int
	TLS            *bool
	Port           *int
}

// Settings are a source's annotations, parsed.
type Settings struct {
	Path           *string
	Timeout        *int
	Interval       *int
	ExpectedStatus []int
	TLS            *bool
	Port           *int
	ExpectedBody   string
	K8sAppName     string
	BYOA           bool
	Hosts          map[string]HostOverride
}

// Parse reads a source's annotations. Every unusable value is a Problem, and
// that setting falls back to its default.
func Parse(ann map[string]string) (Settings, []Problem) {
	var s Settings
	var probs []Problem
	get := func(canonical, legacy string) (string, string, bool) {
		if v, ok := ann[canonical]; ok {
			return canonical, v, true
		}
		if legacy != "" {
			if v, ok := ann[legacy]; ok {
				return legacy, v, true
			}
		}
		return "", "", false
	}
	if name, v, ok := get(Path, LegacyPath); ok {
		if p, err := parsePath(v); err != nil {
			probs = append(probs, Problem{name, v, err.Error()})
		} else {
			s.Path = &p
		}
	}
	if name, v, ok := get(Timeout, LegacyTimeout); ok {
		if n, err := parseSeconds(v, 3600); err != nil {
			probs = append(probs, Problem{name, v, err.Error()})
		} else {
			s.Timeout = &n
		}
	}
	if name, v, ok := get(Interval, LegacyInterval); ok {
		if n, err := parseSeconds(v, 86400); err != nil {
			probs = append(probs, Problem{name, v, err.Error()})
		} else {
			s.Interval = &n
		}
	}
	if name, v, ok := get(ExpectedStatus, LegacyExpectedStatus); ok {
		if codes, err := parseStatusList(v); err != nil {
			probs = append(probs, Problem{name, v, err.Error()})
		} else {
			s.ExpectedStatus = codes
		}
	}
	if name, v, ok := get(TLS, LegacyTLS); ok {
		if b, err := parseBool(v); err != nil {
			probs = append(probs, Problem{name, v, err.Error()})
		} else {
			s.TLS = &b
		}
	}
	if name, v, ok := get(Port, LegacyPort); ok {
		if n, err := parsePort(v); err != nil {
			probs = append(probs, Problem{name, v, err.Error()})
		} else {
			s.Port = &n
		}
	}
	if v, ok := ann[ExpectedBody]; ok {
		if err := checkText(v, MaxExpectedBodyBytes); err != nil {
			probs = append(probs, Problem{ExpectedBody, v, err.Error() + "; no body is expected"})
		} else {
			s.ExpectedBody = v
		}
	}
	s.K8sAppName = strings.TrimSpace(ann[K8sAppName])
	if v, ok := ann[BYOA]; ok {
		b, err := parseBool(v)
		if err != nil {
			probs = append(probs, Problem{BYOA, v, err.Error()})
		}
		s.BYOA = b
	}
	if v, ok := ann[HostConfig]; ok {
		hosts, hp := parseHostConfig(v)
		probs = append(probs, hp...)
		s.Hosts = hosts
	}
	return s, probs
}

func parsePath(v string) (string, error) {
	p := strings.TrimSpace(v)
	switch {
	case p == "":
		return "", fmt.Errorf("empty path")
	case !strings.HasPrefix(p, "/"):
		return "", fmt.Errorf("a path starts with /")
	case strings.ContainsAny(p, " \t\r\n"):
		return "", fmt.Errorf("a path contains no whitespace")
	}
	if err := checkText(p, MaxPathBytes); err != nil {
		return "", err
	}
	return p, nil
}

// checkText refuses what no check should carry: more than max bytes, invalid
// UTF-8, control characters other than tab and line breaks.
func checkText(v string, max int) error {
	switch {
	case len(v) > max:
		return fmt.Errorf("%d bytes, more than the %d allowed", len(v), max)
	case !utf8.ValidString(v):
		return fmt.Errorf("not valid UTF-8")
	case strings.ContainsFunc(v, func(r rune) bool { return unicode.IsControl(r) && r != '\t' && r != '\n' && r != '\r' }):
		return fmt.Errorf("contains control characters")
	}
	return nil
}

// CheckSourcePath is parsePath for a path the source itself names (an HTTPRoute's
// PathPrefix): "" when it cannot be used.
func CheckSourcePath(p string) string {
	if q, err := parsePath(p); err == nil {
		return q
	}
	return ""
}

func parseSeconds(v string, maxSeconds int) (int, error) {
	n, err := strconv.Atoi(strings.TrimSpace(v))
	if err != nil {
		return 0, fmt.Errorf("want a whole number of seconds")
	}
	if n < 1 || n > maxSeconds {
		return 0, fmt.Errorf("want 1 to %d seconds", maxSeconds)
	}
	return n, nil
}

func parsePort(v string) (int, error) {
	n, err := strconv.Atoi(strings.TrimSpace(v))
	if err != nil || n < 1 || n > 65535 {
		return 0, fmt.Errorf("want a port from 1 to 65535")
	}
	return n, nil
}

func parseBool(v string) (bool, error) {
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "true":
		return true, nil
	case "false":
		return false, nil
	}
	return false, fmt.Errorf(`want "true" or "false"`)
}

// parseStatusList reads "200" or "200,204".
func parseStatusList(v string) ([]int, error) {
	var codes []int
	for _, part := range strings.Split(v, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(part))
		if err != nil || n < 100 || n > 599 {
			return nil, fmt.Errorf("want HTTP status codes (100-599), separated by commas")
		}
		if !slices.Contains(codes, n) {
			codes = append(codes, n)
		}
	}
	return codes, nil
}

// hostEntry is the JSON of one host in polycrate_endpoint_host_config.
type hostEntry struct {
	Path           *string         `json:"path"`
	ExpectedStatus json.RawMessage `json:"expected_status"`
	Timeout        *int            `json:"timeout"`
	Interval       *int            `json:"interval"`
	TLS            *bool           `json:"tls"`
	Port           *int            `json:"port"`
}

// parseHostConfig reads the per-host JSON. Malformed JSON ignores every override;
// an invalid field ignores that field.
func parseHostConfig(v string) (map[string]HostOverride, []Problem) {
	var raw map[string]json.RawMessage
	dec := json.NewDecoder(strings.NewReader(v))
	if err := dec.Decode(&raw); err != nil || raw == nil {
		return nil, []Problem{{HostConfig, v, "not a JSON object of host → settings; the per-host overrides are ignored"}}
	}
	out := map[string]HostOverride{}
	var probs []Problem
	hosts := slices.Sorted(maps.Keys(raw))
	for _, h := range hosts {
		var e hostEntry
		d := json.NewDecoder(strings.NewReader(string(raw[h])))
		d.DisallowUnknownFields()
		if err := d.Decode(&e); err != nil {
			probs = append(probs, Problem{HostConfig, string(raw[h]), fmt.Sprintf("entry for %s is invalid (%v); it is ignored", h, err)})
			continue
		}
		var o HostOverride
		bad := func(field, reason string) {
			probs = append(probs, Problem{HostConfig, string(raw[h]), fmt.Sprintf("%s.%s: %s", h, field, reason)})
		}
		if e.Path != nil {
			if p, err := parsePath(*e.Path); err != nil {
				bad("path", err.Error())
			} else {
				o.Path = &p
			}
		}
		if len(e.ExpectedStatus) > 0 && string(e.ExpectedStatus) != "null" {
			if codes, err := statusJSON(e.ExpectedStatus); err != nil {
				bad("expected_status", err.Error())
			} else {
				o.ExpectedStatus = codes
			}
		}
		if e.Timeout != nil {
			if *e.Timeout < 1 || *e.Timeout > 3600 {
				bad("timeout", "want 1 to 3600 seconds")
			} else {
				o.Timeout = e.Timeout
			}
		}
		if e.Interval != nil {
			if *e.Interval < 1 || *e.Interval > 86400 {
				bad("interval", "want 1 to 86400 seconds")
			} else {
				o.Interval = e.Interval
			}
		}
		o.TLS = e.TLS
		if e.Port != nil {
			if *e.Port < 1 || *e.Port > 65535 {
				bad("port", "want a port from 1 to 65535")
			} else {
				o.Port = e.Port
			}
		}
		out[strings.ToLower(strings.TrimSuffix(h, "."))] = o
	}
	return out, probs
}

// statusJSON reads [200, 204] or 200.
func statusJSON(raw json.RawMessage) ([]int, error) {
	var list []int
	if err := json.Unmarshal(raw, &list); err != nil {
		var one int
		if err := json.Unmarshal(raw, &one); err != nil {
			return nil, fmt.Errorf("want a list of HTTP status codes")
		}
		list = []int{one}
	}
	if len(list) == 0 {
		return nil, fmt.Errorf("want at least one status code")
	}
	for _, c := range list {
		if c < 100 || c > 599 {
			return nil, fmt.Errorf("status %d is not an HTTP status code", c)
		}
	}
	return list, nil
}

// Listener is the TLS and port of an HTTPRoute's parent Gateway listener.
type Listener struct {
	TLS  bool
	Port int
}

// Source is what a source itself says about a host, below the annotations.
type Source struct {
	// Listener is the parent Gateway listener (HTTPRoute only; nil for an Ingress).
	Listener *Listener
	// Path is the source's own path (HTTPRoute: the first PathPrefix match).
	Path string
}

// Check is the health check of one host.
type Check struct {
	Host           string
	Path           string
	TLS            bool
	Port           int
	Timeout        int
	Interval       int
	ExpectedStatus []int
	ExpectedBody   string
}

// For computes a host's check. Precedence, per field:
// polycrate_endpoint_host_config > annotations > the source (HTTPRoute listener
// TLS/port, first PathPrefix) > defaults (path /, TLS on, port 443, timeout 5 s,
// interval 60 s, status 200).
func (s Settings) For(host string, src Source) Check {
	c := Check{Host: host, Path: DefaultPath, TLS: DefaultTLS, Port: DefaultPort, Timeout: DefaultTimeout,
		Interval: DefaultInterval, ExpectedStatus: slices.Clone(DefaultExpectedStatus), ExpectedBody: s.ExpectedBody}
	if src.Listener != nil {
		c.TLS, c.Port = src.Listener.TLS, src.Listener.Port
	}
	if src.Path != "" {
		c.Path = src.Path
	}
	if s.Path != nil {
		c.Path = *s.Path
	}
	if s.Timeout != nil {
		c.Timeout = *s.Timeout
	}
	if s.Interval != nil {
		c.Interval = *s.Interval
	}
	if s.ExpectedStatus != nil {
		c.ExpectedStatus = slices.Clone(s.ExpectedStatus)
	}
	if s.TLS != nil {
		c.TLS = *s.TLS
	}
	if s.Port != nil {
		c.Port = *s.Port
	}
	if o, ok := s.Hosts[strings.ToLower(host)]; ok {
		if o.Path != nil {
			c.Path = *o.Path
		}
		if o.ExpectedStatus != nil {
			c.ExpectedStatus = slices.Clone(o.ExpectedStatus)
		}
		if o.Timeout != nil {
			c.Timeout = *o.Timeout
		}
		if o.Interval != nil {
			c.Interval = *o.Interval
		}
		if o.TLS != nil {
			c.TLS = *o.TLS
		}
		if o.Port != nil {
			c.Port = *o.Port
		}
	}
	return c
}
