package dns01

import (
	"net/http/httptest"
	"strings"
	"testing"

	whapi "github.com/cert-manager/cert-manager/pkg/acme/webhook/apis/acme/v1alpha1"

	"github.com/polycrate/polycrate-operator/internal/emulator"
	"github.com/polycrate/polycrate-operator/internal/polycrate"
)

func challenge(fqdn, key string) *whapi.ChallengeRequest {
	return &whapi.ChallengeRequest{ResolvedFQDN: fqdn, Key: key, Action: whapi.ChallengeActionPresent, Type: "dns-01"}
}

func txtValues(t *testing.T, c *polycrate.Client, name string) []string {
	t.Helper()
	rows, err := c.DNSRecords().List(t.Context(), polycrate.Query("name_exact", name, "type", "TXT"))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, r := range rows {
		out = append(out, r.DNSZone.Name+":"+r.Content)
	}
	return out
}

func TestPresentAndCleanUp(t *testing.T) {
	c, _, _, _ := startAPI(t)
	s := &Solver{SolverName: "polycrate", Client: func() *polycrate.Client { return c }}

	// Idempotent: twice presented, one record.
	ch := challenge("_acme-challenge.shop.example.com.", "key-a")
	for range 2 {
		if err := s.Present(ch); err != nil {
			t.Fatal(err)
		}
	}
	if got := txtValues(t, c, "_acme-challenge.shop"); len(got) != 1 || got[0] != "example.com:key-a" {
		t.Fatalf("%v", got)
	}
	// A second value of the name (a wildcard and its base) and an unrelated TXT
	// record written by someone else stay when key-a is cleaned up.
	if err := s.Present(challenge("_acme-challenge.shop.example.com.", "key-b")); err != nil {
		t.Fatal(err)
	}
	zone, err := c.ResolveZone(t.Context(), "example.com")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.DNSRecords().Create(t.Context(), polycrate.DNSRecordRequest{DNSZoneID: zone.ID, Name: "_acme-challenge.shop", Type: "TXT",
		Content: `"v=other"`}); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := s.CleanUp(ch); err != nil {
			t.Fatal(err)
		}
	}
	got := strings.Join(txtValues(t, c, "_acme-challenge.shop"), ",")
	if strings.Contains(got, "key-a") || !strings.Contains(got, "key-b") || !strings.Contains(got, `"v=other"`) {
		t.Fatalf("after CleanUp: %s", got)
	}

	// The external zone with primary_zone=true when no internal zone matches.
	if err := s.Present(challenge("_acme-challenge.www.acme.example.", "key-c")); err != nil {
		t.Fatal(err)
	}
	if got := txtValues(t, c, "_acme-challenge.www"); len(got) != 1 || got[0] != "acme.example:key-c" {
		t.Fatalf("%v", got)
	}
	// The apex.
	if err := s.Present(challenge("example.com.", "key-apex")); err != nil {
		t.Fatal(err)
	}
	if got := txtValues(t, c, "@"); len(got) != 1 {
		t.Fatalf("%v", got)
	}
}

func TestSolverErrorsSayWhatFailed(t *testing.T) {
	c, _, api, _ := startAPI(t)
	s := &Solver{SolverName: "polycrate", Client: func() *polycrate.Client { return c }}
	// A name in no zone the token sees.
	err := s.Present(challenge("_acme-challenge.www.unknown.org.", "k"))
	if err == nil || !strings.Contains(err.Error(), "no DNS zone for _acme-challenge.www.unknown.org") {
		t.Fatalf("%v", err)
	}
	if err := s.CleanUp(challenge("_acme-challenge.www.unknown.org.", "k")); err != nil {
		t.Fatalf("cleaning up where nothing was presented: %v", err)
	}
	// The API refuses the write: its answer is in the error, nothing was written.
	if err := api.SetFaults(emulator.FaultRule{Path: "/api/v1/domains/dnsrecords/", Method: "POST", Status: 503}); err != nil {
		t.Fatal(err)
	}
	err = s.Present(challenge("_acme-challenge.down.example.com.", "k"))
	if err == nil || !strings.Contains(err.Error(), "creating TXT _acme-challenge.down.example.com in zone example.com") || !strings.Contains(err.Error(), "503") {
		t.Fatalf("%v", err)
	}
	if err := api.SetFaults(); err != nil {
		t.Fatal(err)
	}
	if got := txtValues(t, c, "_acme-challenge.down"); len(got) != 0 {
		t.Fatalf("%v", got)
	}
	// Not connected.
	off := &Solver{SolverName: "polycrate", Client: func() *polycrate.Client { return nil }}
	if err := off.Present(challenge("_acme-challenge.x.example.com.", "k")); err == nil || !strings.Contains(err.Error(), "not connected") {
		t.Fatalf("%v", err)
	}
	// API down entirely.
	dead := httptest.NewServer(nil)
	dead.Close()
	dc, _ := polycrate.New(polycrate.Options{BaseURL: dead.URL, Token: polycrate.StaticToken(emulator.DevAgentToken)})
	down := &Solver{SolverName: "polycrate", Client: func() *polycrate.Client { return dc }}
	if err := down.Present(challenge("_acme-challenge.x.example.com.", "k")); err == nil || !strings.Contains(err.Error(), "resolving the DNS zone of _acme-challenge.x.example.com") {
		t.Fatalf("%v", err)
	}
}
