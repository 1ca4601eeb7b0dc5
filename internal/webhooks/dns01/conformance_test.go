package dns01

import (
	"context"
	"net/http/httptest"
	"testing"
	"time"

	acmetest "github.com/cert-manager/cert-manager/test/acme"

	"github.com/polycrate/polycrate-operator/internal/emulator"
	"github.com/polycrate/polycrate-operator/internal/polycrate"
)

// startAPI runs the emulator with its DNS server and returns an agent client and
// the DNS server's address.
func startAPI(t *testing.T) (*polycrate.Client, string, *emulator.Server, string) {
	t.Helper()
	api, err := emulator.New(emulator.Config{})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(api.Handler())
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(func() { cancel(); ts.Close(); _ = api.Close() })
	dnsAddr, err := api.ListenDNS(ctx, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c, err := polycrate.New(polycrate.Options{BaseURL: ts.URL, Token: polycrate.StaticToken(emulator.DevAgentToken)})
	if err != nil {
		t.Fatal(err)
	}
	return c, dnsAddr, api, ts.URL
}

// TestConformance runs cert-manager's own DNS01 conformance suite (test/acme:
// present a record, see it in DNS, clean it up, see it gone; and in strict mode,
// delete one of two values of a name and keep the other) against the solver, with
// the emulator's DNS server as the resolver. The fixture starts its own control
// planes from KUBEBUILDER_ASSETS.
func TestConformance(t *testing.T) {
	c, dnsAddr, _, _ := startAPI(t)
	solver := &Solver{SolverName: "polycrate", Client: func() *polycrate.Client { return c }}
	fixture := acmetest.NewFixture(solver,
		acmetest.SetResolvedZone("example.com."),
		acmetest.SetResolvedFQDN("_acme-challenge.conformance.example.com."),
		acmetest.SetDNSName("conformance.example.com"),
		acmetest.SetAllowAmbientCredentials(false),
		acmetest.SetConfig(map[string]any{}), // the solver takes no per-issuer config: the token is the operator's
		acmetest.SetDNSServer(dnsAddr),
		acmetest.SetUseAuthoritative(false),
		acmetest.SetStrict(true),
		acmetest.SetPollInterval(100*time.Millisecond),
		acmetest.SetPropagationLimit(10*time.Second),
	)
	fixture.RunConformance(t)
}
