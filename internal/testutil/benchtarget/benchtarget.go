// Package benchtarget is the HTTP target of the check benchmarks: the test
// binary itself, started again as another process (so that the target's CPU is
// not counted as the checks'), serving a small JSON body on loopback. Only the
// standard library: the probe package's tests stay light.
package benchtarget

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// env is set in the target process.
const env = "POLYCRATE_BENCH_TARGET"

// Main is a test binary's TestMain: the target when started as one, else the tests.
func Main(m *testing.M) {
	if os.Getenv(env) == "1" {
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

// Start starts the target process (this test binary, with Main as its
// TestMain) and returns its address; it stops with the benchmark.
func Start(b *testing.B) (string, int) {
	b.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), env+"=1")
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

// CPU is this process's user and system CPU so far (the kernel's share:
// sockets, the TCP handshake, the poller).
func CPU() (user, sys time.Duration) {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano()), time.Duration(ru.Stime.Nano())
}
