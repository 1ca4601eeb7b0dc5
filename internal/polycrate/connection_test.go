package polycrate

import (
	"context"
	"testing"
)

func TestConnection(t *testing.T) {
	c := NewConnection(Options{})
	if c.Client() != nil {
		t.Fatal("a new connection has a client")
	}
	if _, err := c.Configure("not a url", "", "t"); err == nil {
		t.Fatal("invalid URL accepted")
	}
	changed, err := c.Configure("https://api.example", "", "t1")
	if err != nil || !changed || c.Client() == nil {
		t.Fatalf("configure: %v %v", changed, err)
	}
	first := c.Client()
	if changed, _ := c.Configure("https://api.example", "", "t1"); changed {
		t.Fatal("same settings reported as a change")
	}
	if changed, _ := c.Configure("https://api.example", "", "t2"); !changed || c.Client() != first {
		t.Fatal("a token change must keep the client and report a change")
	}
	if tok, _ := c.tokenSource(context.Background()); tok != "t2" {
		t.Fatalf("token %q", tok)
	}
	c.Disconnect()
	if c.Client() != nil {
		t.Fatal("still connected")
	}
	if _, err := c.tokenSource(context.Background()); err != ErrNotConnected {
		t.Fatalf("token after disconnect: %v", err)
	}
}
