package dns01

import (
	"context"
	"net/http/httptest"
	"testing"

	"github.com/polycrate/polycrate-operator/internal/emulator"
	"github.com/polycrate/polycrate-operator/internal/polycrate"
)

// FuzzChallenge: whatever name and key a challenge carries, Present and CleanUp
// return (an error for a name no zone holds, or the API's refusal) and never
// crash; what Present created, CleanUp removes — and only it.
func FuzzChallenge(f *testing.F) {
	api, err := emulator.New(emulator.Config{})
	if err != nil {
		f.Fatal(err)
	}
	ts := httptest.NewServer(api.Handler())
	defer ts.Close()
	c, err := polycrate.New(polycrate.Options{BaseURL: ts.URL, Token: polycrate.StaticToken(emulator.DevAgentToken), MaxRetries: -1})
	if err != nil {
		f.Fatal(err)
	}
	s := &Solver{SolverName: "polycrate", Client: func() *polycrate.Client { return c }}
	for _, seed := range [][2]string{
		{"_acme-challenge.shop.example.com.", "key-a"},
		{"_acme-challenge.example.com.", `"quoted"`},
		{"_acme-challenge.*.example.com.", "k"},
		{"EXAMPLE.COM", ""},
		{"_acme-challenge.acme.example.", "x y z"},
		{"nowhere.invalid.", "k"},
		{".", "k"},
	} {
		f.Add(seed[0], seed[1])
	}
	f.Fuzz(func(t *testing.T, fqdn, key string) {
		ch := challenge(fqdn, key)
		presented := s.Present(ch) == nil
		_ = s.CleanUp(ch)
		if !presented {
			return
		}
		_, zone, name, err := s.resolve(context.Background(), ch)
		if err != nil {
			t.Fatalf("presented, but the zone no longer resolves: %v", err)
		}
		rows, err := s.records(context.Background(), c, zone, name)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rows {
			if sameKey(r.Content, key) {
				t.Fatalf("CleanUp left TXT %s = %q in zone %s", name, r.Content, zone.Name)
			}
		}
	})
}
