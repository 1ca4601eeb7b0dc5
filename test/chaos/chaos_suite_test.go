// Package chaos runs the built operator binary against envtest and the API
// emulator, with a fault proxy (internal/testutil/faultproxy) between the two,
// and proves that no fault loses, duplicates or orphans an object in the API:
// an API outage (with the circuit breaker's request rate and the convergence
// after it), 429 with Retry-After on half the writes, 5 s latency, connection
// resets before and after the API committed a write, kill -9 at random moments
// with sources deleted while the operator is down, and two replicas whose
// leader is killed or paused. Each scenario adds a row to a table
// (docs/reliability.md). `make chaos` runs the full sizes; `make test` a reduced run.
package chaos

import (
	"flag"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

var (
	flagFull    = flag.Bool("chaos.full", false, "the full sizes of `make chaos` (20 kills, a 60 s outage, 6,000 endpoints per convergence of the outage scenario); default a reduced run")
	flagOut     = flag.String("chaos.out", "", "write the results table (Markdown) to this file")
	flagSoak    = flag.Duration("chaos.soak", 3*time.Minute, "how long the soak runs (make soak: 30m); its fault cadence and bounds scale with it (soak_test.go)")
	flagSoakOut = flag.String("chaos.soak-out", "", "write the soak's samples (CSV) and plot (SVG) into this directory (default: a temporary one)")
	flagLogs    = flag.String("chaos.logs", "", "keep the operator binary and each process's log in this directory (default: a temporary one, removed)")
)

// sizes of one run.
type sizes struct {
	// batch is the Ingresses of one scenario's changes (hosts each).
	batch, hosts int
	// big is the Ingresses of the outage scenario's fresh convergence and of its
	// changes during the outage.
	big int
	// outage is how long the API answers 503 to everything.
	outage time.Duration
	// window is how long the other faults last.
	window time.Duration
	kills  int
	// converge bounds the wait for convergence.
	converge time.Duration
	// The Kubernetes faults: kube-apiserver restarts during a convergence (each
	// down for restartDown, then warming up for restartWarm), and a freeze.
	restarts                 int
	restartDown, restartWarm time.Duration
	freeze                   time.Duration
}

func runSizes() sizes {
	if *flagFull {
		return sizes{batch: 100, hosts: 2, big: 3000, outage: 60 * time.Second, window: 30 * time.Second, kills: 20, converge: 10 * time.Minute,
			restarts: 5, restartDown: 3 * time.Second, restartWarm: 4 * time.Second, freeze: 60 * time.Second}
	}
	return sizes{batch: 15, hosts: 2, big: 60, outage: 12 * time.Second, window: 5 * time.Second, kills: 2, converge: 3 * time.Minute,
		restarts: 5, restartDown: time.Second, restartWarm: 2 * time.Second, freeze: 10 * time.Second}
}

func TestChaos(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "Chaos: the operator binary, envtest and the emulator behind a fault proxy")
}
