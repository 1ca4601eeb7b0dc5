package polycrate_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/polycrate/polycrate-operator/internal/polycrate"
)

// FuzzResponseDecoding: whatever the API (or something in front of it) answers,
// the client returns a value or a typed error — a DecodeError for a body it
// cannot read, an APIError for an error status — and never panics. The corpus
// is seeded with the shared test vectors' answers.
func FuzzResponseDecoding(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join("..", "..", "testdata", "api-vectors", "*.json"))
	for _, file := range files {
		raw, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		var vectors []struct {
			Response struct {
				Status int             `json:"status"`
				Body   json.RawMessage `json:"body"`
			} `json:"response"`
		}
		if json.Unmarshal(raw, &vectors) != nil {
			continue
		}
		for _, v := range vectors {
			f.Add(uint16(v.Response.Status), []byte(v.Response.Body))
		}
	}
	f.Add(uint16(400), []byte(`{"type":"validation_error","errors":[{"attr":"name","code":"blank","detail":"x"}]}`))
	f.Add(uint16(200), []byte(`{"count":1,"next":"http://elsewhere/?page=2","previous":null,"results":[{}]}`))
	f.Add(uint16(200), []byte(`null`))
	f.Add(uint16(503), []byte(`<html>bad gateway</html>`))

	var status atomic.Uint32
	var body atomic.Value
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(int(status.Load()))
		_, _ = w.Write(body.Load().([]byte))
	}))
	defer srv.Close()
	c, err := polycrate.New(polycrate.Options{BaseURL: srv.URL, Token: polycrate.StaticToken("t"), MaxRetries: -1})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, code uint16, answer []byte) {
		if code < 200 || code > 599 || (code >= 300 && code < 400) || code == 429 || code == 503 {
			code = 200 // redirects and Retry-After waits are tested elsewhere
		}
		status.Store(uint32(code))
		body.Store(answer)
		ctx := context.Background()
		check := func(err error) {
			if err == nil {
				return
			}
			var de *polycrate.DecodeError
			var ae *polycrate.APIError
			var te *polycrate.TransportError
			if !errors.As(err, &de) && !errors.As(err, &ae) && !errors.As(err, &te) {
				t.Fatalf("untyped error %T: %v", err, err)
			}
		}
		_, err := c.Endpoints().Get(ctx, "00000000-0000-0000-0000-000000000001")
		check(err)
		_, err = c.K8sApps().List(ctx, nil)
		check(err)
		_, err = c.LoadBalancers().Get(ctx, "00000000-0000-0000-0000-000000000002")
		check(err)
		_, err = c.ReportHealth(ctx, polycrate.HealthReport{Kind: "operator"})
		check(err)
		_, err = c.GetOperatorRollout(ctx)
		check(err)
	})
}
