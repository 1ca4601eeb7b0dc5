package polycrate_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/polycrate/polycrate-operator/internal/polycrate"
)

// The client's reading of the shared vectors: every expected answer decodes into
// the client's model, and the fields named in client_checks come out right.

type vectorStep struct {
	Name     string `json:"name"`
	Response struct {
		Status  int               `json:"status"`
		Headers map[string]string `json:"headers"`
		Body    json.RawMessage   `json:"body"`
	} `json:"response"`
	Client       string         `json:"client"`
	ClientChecks map[string]any `json:"client_checks"`
}

var models = map[string]func() any{
	"HealthResponse": func() any { return &polycrate.HealthResponse{} },
	"AgentEndpoints": func() any { return &[]polycrate.AgentEndpoint{} },
	"Endpoint":       func() any { return &polycrate.Endpoint{} },
	"EndpointPage": func() any {
		return &struct {
			Count   int                     `json:"count"`
			Results []polycrate.EndpointRow `json:"results"`
		}{}
	},
	"K8sCluster": func() any { return &polycrate.K8sCluster{} },
	"K8sApp":     func() any { return &polycrate.K8sApp{} },
	"K8sVolumePage": func() any {
		return &struct {
			Count   int                      `json:"count"`
			Results []polycrate.K8sVolumeRow `json:"results"`
		}{}
	},
	"Regions":              func() any { return &[]polycrate.Region{} },
	"BucketCreateResponse": func() any { return &polycrate.BucketCreateResponse{} },
	"Bucket":               func() any { return &polycrate.Bucket{} },
	"BucketCredentials": func() any {
		return &struct {
			Data struct {
				Credentials []polycrate.BucketCredential `json:"credentials"`
			} `json:"data"`
		}{}
	},
	"DNSZone":      func() any { return &polycrate.DNSZone{} },
	"DNSRecord":    func() any { return &polycrate.DNSRecord{} },
	"SystemConfig": func() any { return &polycrate.SystemConfig{} },
	"BlockPage": func() any {
		return &struct {
			Count   int                  `json:"count"`
			Results []polycrate.BlockRow `json:"results"`
		}{}
	},
}

// concrete replaces placeholders with sample values, as a real answer would carry.
func concrete(s string) string {
	r := strings.NewReplacer(`"<uuid>"`, `"550e8400-e29b-41d4-a716-446655440000"`, `"<datetime>"`, `"2026-01-06T14:30:00Z"`,
		`"<string>"`, `"text"`, `"<url>"`, `"http://api.example/api/v1/x/?page=2"`, `"<any>"`, `null`)
	s = r.Replace(s)
	for strings.Contains(s, "${") {
		i := strings.Index(s, "${")
		j := strings.Index(s[i:], "}")
		s = s[:i] + "550e8400-e29b-41d4-a716-446655440000" + s[i+j+1:]
	}
	return s
}

func TestVectorsDecode(t *testing.T) {
	files, err := filepath.Glob("../../testdata/api-vectors/*.json")
	if err != nil || len(files) == 0 {
		t.Fatalf("no vectors: %v", err)
	}
	decoded := 0
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var steps []vectorStep
		if err := json.Unmarshal(raw, &steps); err != nil {
			t.Fatal(err)
		}
		for _, st := range steps {
			if st.Client == "" {
				continue
			}
			decoded++
			t.Run(st.Name, func(t *testing.T) {
				body := concrete(string(st.Response.Body))
				if st.Client == "error" {
					checkError(t, st, body)
					return
				}
				newModel, ok := models[st.Client]
				if !ok {
					t.Fatalf("unknown client model %q", st.Client)
				}
				m := newModel()
				if err := json.Unmarshal([]byte(body), m); err != nil {
					t.Fatalf("%s does not decode the answer: %v", st.Client, err)
				}
				// Re-encode what the client understood and check the named fields.
				b, _ := json.Marshal(m)
				var back any
				_ = json.Unmarshal(b, &back)
				for path, want := range st.ClientChecks {
					got, ok := lookup(back, path)
					if !ok {
						t.Errorf("%s: field %s lost by the client model", st.Client, path)
						continue
					}
					if want == "<uuid>" {
						if s, _ := got.(string); len(s) != 36 {
							t.Errorf("%s: %s = %v, want a UUID", st.Client, path, got)
						}
						continue
					}
					if fmt.Sprint(got) != fmt.Sprint(want) {
						t.Errorf("%s: %s = %v, want %v", st.Client, path, got, want)
					}
				}
			})
		}
	}
	if decoded < 15 {
		t.Fatalf("only %d vectors carry a client model", decoded)
	}
}

// checkError feeds an error answer through the client's error decoding.
func checkError(t *testing.T, st vectorStep, body string) {
	t.Helper()
	h := http.Header{}
	for k, v := range st.Response.Headers {
		h.Set(k, v)
	}
	err := polycrate.DecodeAPIError("GET", "/api/v1/x/", st.Response.Status, h, []byte(body))
	var apiErr *polycrate.APIError
	if !asAPIError(err, &apiErr) {
		t.Fatalf("not an APIError: %v", err)
	}
	for k, want := range st.ClientChecks {
		var got any
		switch k {
		case "status":
			got = apiErr.StatusCode
		case "type":
			got = apiErr.Type
		case "code":
			got = apiErr.Errors[0].Code
		case "attr":
			found := false
			for _, e := range apiErr.Errors {
				if e.Attr != nil && *e.Attr == want {
					found = true
				}
			}
			if !found {
				t.Errorf("no error item with attr %v in %v", want, apiErr)
			}
			continue
		case "retry_after_seconds":
			got = int(apiErr.RetryAfter.Seconds())
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s = %v, want %v", k, got, want)
		}
	}
}

func lookup(v any, path string) (any, bool) {
	cur := v
	for _, p := range strings.Split(path, ".") {
		switch c := cur.(type) {
		case map[string]any:
			var ok bool
			if cur, ok = c[p]; !ok {
				return nil, false
			}
		case []any:
			var i int
			if _, err := fmt.Sscan(p, &i); err != nil || i >= len(c) {
				return nil, false
			}
			cur = c[i]
		default:
			return nil, false
		}
	}
	return cur, true
}

func asAPIError(err error, target **polycrate.APIError) bool {
	e, ok := err.(*polycrate.APIError)
	if ok {
		*target = e
	}
	return ok
}
