package externaldns_test

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/go-logr/logr"

	"github.com/polycrate/polycrate-operator/internal/emulator"
	"github.com/polycrate/polycrate-operator/internal/polycrate"
	"github.com/polycrate/polycrate-operator/internal/webhooks/externaldns"
)

// FuzzWebhookBodies: whatever external-dns (or anyone who reaches the port)
// POSTs to /records and /adjustendpoints, the provider answers with a status of
// the protocol — 200/204, or a 4xx/5xx with a message — never a crash or a 500,
// and GET /records keeps working. The provider writes to a real (in-process)
// emulator, so accepted changes really go through the DNS API.
func FuzzWebhookBodies(f *testing.F) {
	api, err := emulator.New(emulator.Config{})
	if err != nil {
		f.Fatal(err)
	}
	apiSrv := httptest.NewServer(api.Handler())
	defer apiSrv.Close()
	c, err := polycrate.New(polycrate.Options{BaseURL: apiSrv.URL, Token: polycrate.StaticToken(emulator.DevAgentToken), MaxRetries: -1})
	if err != nil {
		f.Fatal(err)
	}
	srv := httptest.NewServer(externaldns.Handler(&externaldns.Provider{Client: func() *polycrate.Client { return c }}, logr.Discard()))
	defer srv.Close()

	f.Add(true, []byte(`{"Create":[{"dnsName":"www.example.com","targets":["203.0.113.1"],"recordType":"A","recordTTL":300}]}`))
	f.Add(true, []byte(`{"Create":[{"dnsName":"txt.example.com","targets":["\"heritage=external-dns\""],"recordType":"TXT"}],"Delete":[{"dnsName":"gone.example.com","targets":["1.2.3.4"],"recordType":"A"}]}`))
	f.Add(true, []byte(`{"UpdateOld":[{"dnsName":"a.example.com","targets":["1.1.1.1"],"recordType":"A"}],"UpdateNew":[{"dnsName":"a.example.com","targets":["2.2.2.2"],"recordType":"A"}]}`))
	f.Add(true, []byte(`{"Create":[{"dnsName":"mx.example.com","targets":["10 mail.example.com"],"recordType":"MX"},{"dnsName":"srv.example.com","targets":["1 2 3 x."],"recordType":"SRV"}]}`))
	f.Add(false, []byte(`[{"dnsName":"www.example.com","targets":["203.0.113.1"],"recordType":"A","providerSpecific":[{"name":"x","value":"y"}]}]`))
	f.Add(false, []byte(`[]`))
	f.Add(true, []byte(`{`))
	f.Add(false, []byte(`null`))
	f.Add(true, []byte(`{"Create":[{"dnsName":"","targets":[""],"recordType":""}]}`))

	post := func(t *testing.T, path string, body []byte) (int, []byte) {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+path, bytes.NewReader(body))
		req.Header.Set("Content-Type", externaldns.MediaType)
		req.Header.Set("Accept", externaldns.MediaType)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("POST %s: no answer (a crash?): %v", path, err)
		}
		defer resp.Body.Close()
		out, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, out
	}
	f.Fuzz(func(t *testing.T, records bool, body []byte) {
		path := "/adjustendpoints"
		if records {
			path = "/records"
		}
		code, out := post(t, path, body)
		switch {
		case code == http.StatusOK || code == http.StatusNoContent:
		case code == http.StatusInternalServerError:
			t.Fatalf("POST %s answered 500: %s", path, out)
		case code >= 400 && len(out) == 0:
			t.Fatalf("POST %s answered %d without a message", path, code)
		case code < 200 || (code >= 300 && code < 400):
			t.Fatalf("POST %s answered %d", path, code)
		}
		resp, err := http.Get(srv.URL + "/records")
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("GET /records after POST %s: %v %v", path, err, resp)
		}
		_ = resp.Body.Close()
	})
}
