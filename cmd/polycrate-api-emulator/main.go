// Command polycrate-api-emulator serves a local Polycrate API for development, the
// demo and the tests: the contract of docs/api-contract.md, strict with requests,
// with an optional SQLite data file and test controls under /_emulator/.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/polycrate/polycrate-operator/internal/emulator"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:8090", "listen address")
	dnsAddr := flag.String("dns-addr", "127.0.0.1:8053", "serve DNS for the zones (udp and tcp) on this address; empty: off")
	seedFile := flag.String("seed", "", "tenancy seed (YAML); default: built-in seed (acme-corp/production, PoP fra1)")
	data := flag.String("data", "", "SQLite data file; default: in memory")
	noControls := flag.Bool("no-controls", false, "turn off the /_emulator/ test controls")
	silence := flag.Duration("agent-silence-threshold", 5*time.Minute, "an agent silent this long turns CRITICAL and a downtime opens")
	purge := flag.Duration("purge-after", time.Minute, "soft-deleted objects disappear this long after DELETE")
	logLevel := flag.String("log-level", "info", "debug logs one line per request")
	lbDelay := flag.Duration("lb-address-delay", 2*time.Second, "a new load balancer instance gets its public address from the seed's ip_pool this long after it was created")
	flag.Parse()

	var level slog.Level
	if err := level.UnmarshalText([]byte(*logLevel)); err != nil {
		fmt.Fprintln(os.Stderr, "invalid --log-level:", err)
		os.Exit(2)
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	seed, err := emulator.LoadSeed(*seedFile)
	if err != nil {
		fmt.Fprintln(os.Stderr, "polycrate-api-emulator:", err)
		os.Exit(1)
	}
	srv, err := emulator.New(emulator.Config{Seed: seed, DataFile: *data, NoControls: *noControls, LBAddressDelay: *lbDelay,
		AgentSilenceThreshold: *silence, PurgeAfter: *purge, Logger: log})
	if err != nil {
		fmt.Fprintln(os.Stderr, "polycrate-api-emulator:", err)
		os.Exit(1)
	}
	defer func() { _ = srv.Close() }()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	storage := "in memory"
	if *data != "" {
		storage = *data
	}
	log.Info("polycrate-api-emulator listening", "addr", "http://"+*addr, "storage", storage, "controls", !*noControls)
	if *seedFile == "" {
		log.Info("default seed: organization acme-corp, workspace production (PoP fra1)",
			"agentToken", emulator.DevAgentToken, "systemToken", emulator.DevSystemToken)
	}
	if *dnsAddr != "" {
		served, err := srv.ListenDNS(ctx, *dnsAddr)
		if err != nil {
			fmt.Fprintln(os.Stderr, "polycrate-api-emulator: DNS:", err)
			os.Exit(1)
		}
		log.Info("serving DNS for the zones", "addr", served)
	}
	if err := srv.ListenAndServe(ctx, *addr); err != nil {
		fmt.Fprintln(os.Stderr, "polycrate-api-emulator:", err)
		os.Exit(1)
	}
	log.Info("polycrate-api-emulator stopped")
}
