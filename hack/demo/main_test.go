package main

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// A port another process holds ends the demo at once, naming the port and the
// flag that moves it, before anything is written: the last run's data stays,
// no control plane starts, and nothing talks to the process holding the port.
func TestDemoRefusesBusyPortsBeforeWritingAnything(t *testing.T) {
	free := func() string {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = l.Close() }()
		return l.Addr().String()
	}
	freePort := func() int {
		_, p, _ := net.SplitHostPort(free())
		n, _ := strconv.Atoi(p)
		return n
	}
	for _, tc := range []struct {
		name string
		busy string // which address the other process holds
	}{{"api", "api"}, {"health probes", "probe"}, {"metrics", "metrics"}, {"DNS (tcp)", "dns-tcp"}, {"DNS (udp)", "dns-udp"}, {"external-dns", "external-dns"}} {
		t.Run(tc.name, func(t *testing.T) {
			api, probe, metrics, dns := free(), free(), free(), free()
			demoDNSAddr, demoExternalDNSPort = dns, freePort()
			var holder interface{ Close() error }
			var err error
			var port, flag string
			switch tc.busy {
			case "api":
				holder, err = net.Listen("tcp", api)
				_, port, _ = net.SplitHostPort(api)
				flag = "-api-addr"
			case "probe":
				holder, err = net.Listen("tcp", probe)
				_, port, _ = net.SplitHostPort(probe)
				flag = "-health-probe-bind-address"
			case "metrics":
				holder, err = net.Listen("tcp", metrics)
				_, port, _ = net.SplitHostPort(metrics)
				flag = "-metrics-bind-address"
			case "dns-tcp":
				holder, err = net.Listen("tcp", dns)
				_, port, _ = net.SplitHostPort(dns)
				flag = "-dns-addr"
			case "dns-udp":
				holder, err = net.ListenPacket("udp", dns)
				_, port, _ = net.SplitHostPort(dns)
				flag = "-dns-addr"
			case "external-dns":
				holder, err = net.Listen("tcp", ":"+strconv.Itoa(demoExternalDNSPort))
				port, flag = strconv.Itoa(demoExternalDNSPort), "-external-dns-port"
			}
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = holder.Close() }()

			state := t.TempDir()
			lastRun := filepath.Join(state, "api.db")
			if err := os.WriteFile(lastRun, []byte("the last run's data"), 0o600); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			start := time.Now()
			err = run(ctx, api, probe, metrics, state)
			if err == nil {
				t.Fatal("the demo ran although a port it needs is held by another process")
			}
			want := "port " + port + " is in use (another demo?); pass " + flag
			if got := err.Error(); len(got) < len(want) || got[:len(want)] != want {
				t.Fatalf("error %q, want it to start with %q", got, want)
			}
			if d := time.Since(start); d > 5*time.Second {
				t.Fatalf("took %s: the demo started something before it checked its ports", d)
			}
			if b, err := os.ReadFile(lastRun); err != nil || string(b) != "the last run's data" {
				t.Fatalf("the demo touched its state before it checked its ports: %q, %v", b, err)
			}
			entries, _ := os.ReadDir(state)
			if len(entries) != 1 {
				t.Fatalf("the demo wrote into its state directory: %v", entries)
			}
			// The API port is free again for the next try (the api case: still held by the other process).
			if tc.busy != "api" {
				l, err := net.Listen("tcp", api)
				if err != nil {
					t.Fatalf("the demo kept the emulator's port after refusing to start: %v", err)
				}
				_ = l.Close()
			}
		})
	}
}
