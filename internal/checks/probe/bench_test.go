package probe

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/polycrate/polycrate-operator/internal/polycrate"
	"github.com/polycrate/polycrate-operator/internal/testutil/benchtarget"
)

// TestMain doubles as the benchmark's target (another process).
func TestMain(m *testing.M) { benchtarget.Main(m) }

// benchTarget starts the target process and returns its address.
func benchTarget(b *testing.B) (string, int) { return benchtarget.Start(b) }

func cpuTime() time.Duration {
	user, sys := benchtarget.CPU()
	return user + sys
}

// BenchmarkHTTPCheck measures the CPU of one http check with a fresh connection
// against a loopback target in another process: checks per CPU-second of this
// process (blackbox_exporter: ≈1,160 probes per CPU-second on this machine kind;
// docs/monitoring.md). 8 checks run at once, as a scheduler would.
func BenchmarkHTTPCheck(b *testing.B) {
	host, port := benchTarget(b)
	p := &Prober{}
	t := Target{ID: "bench", Kind: "http", Address: host, Port: port, Spec: polycrate.EndpointSpec{HTTP: &polycrate.HTTPSpec{Path: "/", Timeout: 5}}}
	if out := p.Run(context.Background(), t); out.Failure != nil {
		b.Fatal(out.Failure)
	}
	b.ReportAllocs()
	b.ResetTimer()
	cpu := cpuTime()
	var wg sync.WaitGroup
	work := make(chan struct{})
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range work {
				if out := p.Run(context.Background(), t); out.Failure != nil {
					b.Error(out.Failure)
				}
			}
		}()
	}
	for range b.N {
		work <- struct{}{}
	}
	close(work)
	wg.Wait()
	used := cpuTime() - cpu
	b.ReportMetric(float64(b.N)/used.Seconds(), "checks/cpu-s")
	b.ReportMetric(float64(used.Microseconds())/float64(b.N), "cpu-µs/check")
}
