package faultproxy

import (
	"context"
	"errors"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/polycrate/polycrate-operator/internal/emulator"
	"github.com/polycrate/polycrate-operator/internal/polycrate"
)

func TestFaults(t *testing.T) {
	api, err := emulator.New(emulator.Config{})
	if err != nil {
		t.Fatal(err)
	}
	upstream := httptest.NewServer(api.Handler())
	defer upstream.Close()
	p, err := New(upstream.URL, 1)
	if err != nil {
		t.Fatal(err)
	}
	front := httptest.NewServer(p)
	defer front.Close()
	c, err := polycrate.New(polycrate.Options{BaseURL: front.URL, Token: polycrate.StaticToken(emulator.DevAgentToken), MaxRetries: -1})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	create := func(name string) error {
		_, err := c.Endpoints().Create(ctx, polycrate.EndpointRequest{Name: name, RemoteAddress: name + ".example.com"})
		return err
	}
	start := time.Now()
	var te *polycrate.TransportError

	// Reset before: nothing reaches the API.
	p.Set(&Fault{WritesOnly: true, ResetBefore: true})
	if err := create("before"); !errors.As(err, &te) || api.Live("endpoints") != 0 {
		t.Fatalf("reset before: %v, %d live", err, api.Live("endpoints"))
	}
	// Reset after: the API committed, the answer is lost.
	p.Set(&Fault{WritesOnly: true, ResetAfter: true})
	if err := create("after"); !errors.As(err, &te) || api.Live("endpoints") != 1 {
		t.Fatalf("reset after: %v, %d live", err, api.Live("endpoints"))
	}
	// Reads pass a writes-only fault.
	if _, err := c.Endpoints().List(ctx, nil); err != nil {
		t.Fatal(err)
	}
	// A status with Retry-After, in the API's place.
	p.Set(&Fault{Status: 429, RetryAfter: 7})
	if _, err := c.Endpoints().List(ctx, nil); !status(err, 429) || polycrate.RetryAfter(err) != 7*time.Second {
		t.Fatalf("429: %v", err)
	}
	// Latency, then the request passes.
	p.Set(&Fault{Latency: 300 * time.Millisecond})
	t0 := time.Now()
	if err := create("slow"); err != nil || time.Since(t0) < 300*time.Millisecond {
		t.Fatalf("latency: %v after %s", err, time.Since(t0))
	}
	// Rate: about half.
	p.Set(&Fault{Status: 503, Rate: 0.5})
	failed := 0
	for i := 0; i < 200; i++ {
		if _, err := c.Pops().List(ctx, nil); status(err, 503) {
			failed++
		}
	}
	if failed < 70 || failed > 130 {
		t.Fatalf("rate 0.5 failed %d of 200", failed)
	}
	p.Set(nil)
	if n := p.Count(start, time.Now().Add(time.Second)); n != 205 {
		t.Fatalf("counted %d requests, want 205", n)
	}
}

// status reports whether err is the API's answer with that status code.
func status(err error, code int) bool {
	e, ok := errors.AsType[*polycrate.APIError](err)
	return ok && e.StatusCode == code
}
