package emulator

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
)

const otherAgentToken = "other-agent-token"

// testSeed is the default seed plus a second organization, for cross-workspace tests.
func testSeed(t testing.TB) *Seed {
	t.Helper()
	s, err := ParseSeed(DefaultSeedYAML)
	if err != nil {
		t.Fatal(err)
	}
	s.Pops = append(s.Pops, SeedPop{Name: "nbg1"})
	s.Organizations = append(s.Organizations, SeedOrganization{Name: "globex", Workspaces: []SeedWorkspace{
		{Name: "globex-prod", Pop: "nbg1", Tokens: []string{otherAgentToken}}}})
	return s
}

func newTestServer(t testing.TB, cfg Config) (*Server, *httptest.Server) {
	t.Helper()
	if cfg.Seed == nil {
		cfg.Seed = testSeed(t)
	}
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(s.Handler())
	t.Cleanup(func() { ts.Close(); _ = s.Close() })
	return s, ts
}

type vectorStep struct {
	Name    string      `json:"name"`
	Token   string      `json:"token"`
	Faults  []FaultRule `json:"faults"`
	Request struct {
		Method  string            `json:"method"`
		Path    string            `json:"path"`
		Headers map[string]string `json:"headers"`
		Body    json.RawMessage   `json:"body"`
	} `json:"request"`
	Response struct {
		Status  int               `json:"status"`
		Headers map[string]string `json:"headers"`
		Body    json.RawMessage   `json:"body"`
	} `json:"response"`
	Save         map[string]string `json:"save"`
	Client       string            `json:"client"`
	ClientChecks map[string]any    `json:"client_checks"`
}

var tokens = map[string]string{"agent": DevAgentToken, "other-agent": otherAgentToken, "system": DevSystemToken}

// TestVectors replays the shared vectors (testdata/api-vectors) against the emulator.
func TestVectors(t *testing.T) {
	files, err := filepath.Glob("../../testdata/api-vectors/*.json")
	if err != nil || len(files) == 0 {
		t.Fatalf("no vectors found: %v", err)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			raw, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			var steps []vectorStep
			if err := json.Unmarshal(raw, &steps); err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			srv, ts := newTestServer(t, Config{})
			vars := map[string]string{}
			for _, st := range steps {
				if len(st.Faults) > 0 {
					if err := srv.SetFaults(st.Faults...); err != nil {
						t.Fatalf("%s: faults: %v", st.Name, err)
					}
				}
				status, header, body := replay(t, ts.URL, st, vars)
				if status != st.Response.Status {
					t.Fatalf("%s: status %d, want %d; body %s", st.Name, status, st.Response.Status, body)
				}
				for k, v := range st.Response.Headers {
					if header.Get(k) != v {
						t.Errorf("%s: header %s = %q, want %q", st.Name, k, header.Get(k), v)
					}
				}
				if len(st.Response.Body) > 0 {
					var want, got any
					if err := json.Unmarshal([]byte(substitute(string(st.Response.Body), vars)), &want); err != nil {
						t.Fatal(err)
					}
					if err := json.Unmarshal(body, &got); err != nil {
						t.Fatalf("%s: answer is not JSON: %s", st.Name, body)
					}
					if err := matchJSON(want, got, "$"); err != nil {
						t.Fatalf("%s: %v\nanswer: %s", st.Name, err, body)
					}
				}
				for name, field := range st.Save {
					var m map[string]any
					_ = json.Unmarshal(body, &m)
					vars[name] = fmt.Sprint(m[field])
				}
				_ = srv.SetFaults()
			}
		})
	}
}

func replay(t *testing.T, base string, st vectorStep, vars map[string]string) (int, http.Header, []byte) {
	t.Helper()
	var body io.Reader
	if len(st.Request.Body) > 0 {
		body = strings.NewReader(substitute(string(st.Request.Body), vars))
	}
	req, err := http.NewRequest(st.Request.Method, base+substitute(st.Request.Path, vars), body)
	if err != nil {
		t.Fatal(err)
	}
	if tok := tokens[st.Token]; tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range st.Request.Headers {
		req.Header.Set(k, substitute(v, vars))
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s: %v", st.Name, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, b
}

var varRE = regexp.MustCompile(`\$\{([a-z_]+)\}`)

func substitute(s string, vars map[string]string) string {
	return varRE.ReplaceAllStringFunc(s, func(m string) string {
		if v, ok := vars[varRE.FindStringSubmatch(m)[1]]; ok {
			return v
		}
		return m
	})
}

// matchJSON checks that got contains want (extra object keys are allowed).
func matchJSON(want, got any, path string) error {
	switch w := want.(type) {
	case string:
		g, isStr := got.(string)
		switch w {
		case "<any>":
			return nil
		case "<string>":
			if !isStr {
				return fmt.Errorf("%s: want a string, got %v", path, got)
			}
		case "<uuid>":
			if _, err := uuid.Parse(g); !isStr || err != nil {
				return fmt.Errorf("%s: want a UUID, got %v", path, got)
			}
		case "<datetime>":
			if _, err := time.Parse(time.RFC3339Nano, g); !isStr || err != nil {
				return fmt.Errorf("%s: want a date-time, got %v", path, got)
			}
		case "<url>":
			if !isStr || !strings.HasPrefix(g, "http") {
				return fmt.Errorf("%s: want a URL, got %v", path, got)
			}
		default:
			if !isStr || g != w {
				return fmt.Errorf("%s: want %q, got %v", path, w, got)
			}
		}
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return fmt.Errorf("%s: want an object, got %v", path, got)
		}
		keys := slices.Sorted(maps.Keys(w))
		for _, k := range keys {
			gv, present := g[k]
			if !present {
				return fmt.Errorf("%s.%s: missing", path, k)
			}
			if err := matchJSON(w[k], gv, path+"."+k); err != nil {
				return err
			}
		}
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) != len(w) {
			return fmt.Errorf("%s: want %d items, got %v", path, len(w), got)
		}
		for i := range w {
			if err := matchJSON(w[i], g[i], fmt.Sprintf("%s[%d]", path, i)); err != nil {
				return err
			}
		}
	default:
		wb, _ := json.Marshal(want)
		gb, _ := json.Marshal(got)
		if !bytes.Equal(wb, gb) {
			return fmt.Errorf("%s: want %s, got %s", path, wb, gb)
		}
	}
	return nil
}

func httptestServer(s *Server) *httptest.Server { return httptest.NewServer(s.Handler()) }
