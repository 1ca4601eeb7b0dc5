package probe

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/polycrate/polycrate-operator/internal/polycrate"
)

// TestMain doubles as the benchmark's target: with PROBE_BENCH_TARGET=1 the test
// binary is only an HTTP server on loopback (another process, so that its CPU is
// not counted as the checks').
func TestMain(m *testing.M) {
	if os.Getenv("PROBE_BENCH_TARGET") == "1" {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			os.Exit(1)
		}
		fmt.Println(l.Addr().String())
		body := []byte(`{"status":"ok"}`)
		_ = http.Serve(l, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write(body) }))
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// benchTarget starts the target process and returns its address.
func benchTarget(b *testing.B) (string, int) {
	b.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "PROBE_BENCH_TARGET=1")
	out, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		b.Fatal(err)
	}
	host, port, _ := net.SplitHostPort(strings.TrimSpace(line))
	n, _ := strconv.Atoi(port)
	return host, n
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
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
