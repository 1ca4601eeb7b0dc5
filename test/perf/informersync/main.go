// Command informersync measures what bounds the operator's restart at scale: how
// long its cache takes to list N Endpoints, and what that costs its process
// and the API server, with the operator's LIST decoded in one pass (its
// default, internal/manager/endpointlist.go), client-go's streaming list
// (WatchListClient, client-go's default since Kubernetes 1.35: the initial
// list comes as watch events, here decoded in one pass too), and client-go's
// own LIST and decoder, in turn (docs/performance-log.md, "Restart until idle at
// 20,000 Ingresses").
//
//	go run ./test/perf/informersync [-endpoints 40000] [-runs 3] [-cpuprofile DIR]
//
// It starts envtest, declares N Endpoints as the operator leaves them (server-
// side apply by its field manager, then the sync's status: the same
// managedFields), and syncs a fresh process's cache — the operator's own
// (internal/manager: its transform and its one-pass Endpoint
// watch) with one informer, for Endpoints — once per mode and run. Each child
// prints the wall time until the informer synced, its CPU time and its peak
// resident memory; the parent adds the control plane's CPU time over the
// child's run; with -cpuprofile it writes its CPU profile to DIR (the last
// run's, per mode), and the kube-apiserver's CPU profile over each child's run
// to apiserver-MODE.pprof.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/pprof"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/polycrate/polycrate-operator/api/v1alpha1"
	"github.com/polycrate/polycrate-operator/internal/manager"
	"github.com/polycrate/polycrate-operator/internal/testutil"
)

// cpuProfileDir is where children write their CPU profiles ("": none).
var cpuProfileDir string

// sample is one child's measurement.
type sample struct {
	Mode       string  `json:"mode"`
	Seconds    float64 `json:"seconds"`
	CPUSeconds float64 `json:"cpu_seconds"`
	PeakRSSMiB float64 `json:"peak_rss_mib"`
	// ServerCPUSeconds is the control plane's (kube-apiserver and etcd) over the
	// child's whole run, its start included.
	ServerCPUSeconds float64 `json:"server_cpu_seconds"`
}

// modes maps a mode to the manager's option and client-go's feature gate. (A
// fourth mode, the streaming list without gzip, was dropped on 2026-12-03: 6.0–
// 7.2 s against 4.3–5.4 s with it.)
var modes = []struct {
	name, env string
	stream    bool
}{
	{"LIST, one-pass (default)", "KUBE_FEATURE_WatchListClient=true", false},
	{"watch-list, one-pass", "KUBE_FEATURE_WatchListClient=true", true},
	{"LIST, client-go", "KUBE_FEATURE_WatchListClient=false", true},
}

func main() {
	endpoints := flag.Int("endpoints", 40000, "Endpoints to declare (20,000 Ingresses × 2 hosts: 40,000)")
	runs := flag.Int("runs", 3, "measurements per mode, alternating")
	child := flag.String("child", "", "(internal) sync once against this kubeconfig and print the sample")
	mode := flag.String("mode", "", "(internal) the child's mode name")
	stream := flag.Bool("stream", false, "(internal) the child's manager takes the streaming list (manager.Options.StreamEndpointList)")
	flag.StringVar(&cpuProfileDir, "cpuprofile", "", "write each child's CPU profile to this directory (go tool pprof)")
	flag.Parse()
	if *child != "" {
		if err := syncOnce(*child, *mode, *stream); err != nil {
			fmt.Fprintln(os.Stderr, "informersync:", err)
			os.Exit(1)
		}
		return
	}
	if err := run(*endpoints, *runs); err != nil {
		fmt.Fprintln(os.Stderr, "informersync:", err)
		os.Exit(1)
	}
}

func run(n, runs int) error {
	env, cfg, err := testutil.Start(testutil.Options{OwnCRDs: true})
	if err != nil {
		return err
	}
	defer func() { _ = env.Stop() }()
	dir, err := os.MkdirTemp("", "informersync-")
	if err != nil {
		return err
	}
	defer func() { _ = os.RemoveAll(dir) }()
	kubeconfig := dir + "/kubeconfig"
	if err := os.WriteFile(kubeconfig, env.KubeConfig, 0o600); err != nil {
		return err
	}
	cfg.QPS, cfg.Burst = 1000, 2000
	c, err := client.New(cfg, client.Options{Scheme: testutil.Scheme()})
	if err != nil {
		return err
	}
	start := time.Now()
	if err := declare(context.Background(), c, n); err != nil {
		return err
	}
	fmt.Printf("declared %d Endpoints in %.0f s\n", n, time.Since(start).Seconds())
	self, err := os.Executable()
	if err != nil {
		return err
	}
	byMode := map[string][]sample{}
	for i := 0; i < runs; i++ {
		for _, m := range modes {
			cmd := exec.Command(self, "-child", kubeconfig, "-mode", m.name, "-cpuprofile", cpuProfileDir, fmt.Sprintf("-stream=%t", m.stream))
			cmd.Env = append(os.Environ(), m.env)
			cmd.Stderr = os.Stderr
			// The API server's side of the same sync: its CPU profile over the
			// child's run (the server's encoding is what bounds the sync).
			profiled := make(chan error, 1)
			if cpuProfileDir != "" {
				go func() {
					profiled <- apiServerProfile(cfg, filepath.Join(cpuProfileDir, "apiserver-"+profileName(m.name)+".pprof"))
				}()
			} else {
				profiled <- nil
			}
			cpu0 := testutil.ServerCPU()
			out, err := cmd.Output()
			serverCPU := testutil.ServerCPU() - cpu0
			if perr := <-profiled; perr != nil {
				fmt.Fprintln(os.Stderr, "informersync: the API server's profile:", perr)
			}
			if err != nil {
				return fmt.Errorf("%s: %w", m.name, err)
			}
			var s sample
			if err := json.Unmarshal(bytes.TrimSpace(out), &s); err != nil {
				return fmt.Errorf("%s: %q: %w", m.name, out, err)
			}
			s.ServerCPUSeconds = serverCPU
			fmt.Printf("  run %d  %-26s %6.2f s   CPU %5.2f s   peak RSS %6.1f MiB   control plane CPU %5.2f s\n", i+1, m.name, s.Seconds, s.CPUSeconds, s.PeakRSSMiB, s.ServerCPUSeconds)
			byMode[m.name] = append(byMode[m.name], s)
		}
	}
	fmt.Printf("%d Endpoints, %d runs; median (min–max)\n", n, runs)
	for _, m := range modes {
		ss := byMode[m.name]
		f := func(get func(sample) float64) string {
			v := make([]float64, len(ss))
			for i, s := range ss {
				v[i] = get(s)
			}
			sort.Float64s(v)
			return fmt.Sprintf("%.2f (%.2f–%.2f)", v[len(v)/2], v[0], v[len(v)-1])
		}
		fmt.Printf("  %-26s sync %s s   CPU %s s   peak RSS %s MiB   control plane CPU %s s\n", m.name,
			f(func(s sample) float64 { return s.Seconds }), f(func(s sample) float64 { return s.CPUSeconds }),
			f(func(s sample) float64 { return s.PeakRSSMiB }), f(func(s sample) float64 { return s.ServerCPUSeconds }))
	}
	return nil
}

// declare writes n Endpoints as discovery and the sync leave them: an apply by
// the operator's field manager (labels, finalizer, owner, spec), then the
// sync's status patch.
func declare(ctx context.Context, c client.Client, n int) error {
	ns := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": "perf"}}}
	if err := c.Create(ctx, ns); err != nil {
		return err
	}
	work := make(chan int)
	errs := make(chan error, 8)
	var wg sync.WaitGroup
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				if err := declareOne(ctx, c, i); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	var err error
feed:
	for i := 0; i < n; i++ {
		select {
		case work <- i:
		case err = <-errs:
			break feed
		}
	}
	close(work)
	wg.Wait()
	if err == nil {
		select {
		case err = <-errs:
		default:
		}
	}
	return err
}

func declareOne(ctx context.Context, c client.Client, i int) error {
	ing, host := fmt.Sprintf("app-%05d", i/2), fmt.Sprintf("h%d.app-%05d.example.com", i%2, i/2)
	ep := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": v1.GroupVersion.String(), "kind": "Endpoint",
		"metadata": map[string]any{"name": fmt.Sprintf("h%d-app-%05d", i%2, i/2), "namespace": "perf",
			"labels":     map[string]any{v1.LabelDiscovered: "true", v1.LabelEndpointSourceIngress: ing},
			"finalizers": []any{v1.FinalizerEndpointCleanup},
			"ownerReferences": []any{map[string]any{"apiVersion": "networking.k8s.io/v1", "kind": "Ingress", "name": ing,
				"uid": fmt.Sprintf("00000000-0000-4000-9000-%012d", i/2)}}},
		// As discovery declares the perf harness's Ingresses (a path annotation):
		// the fields at the CRD's default are left out.
		"spec": map[string]any{"displayName": host, "remoteAddress": host, "path": "/health"},
	}}
	if err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(ep.DeepCopy()), client.FieldOwner("polycrate-operator"), client.ForceOwnership); err != nil {
		return err
	}
	now := time.Now().UTC().Format(time.RFC3339)
	status := fmt.Sprintf(`{"status":{"phase":"Synced","apiID":"00000000-0000-4000-8000-%012d","configHash":"%016x",`+
		`"lastSyncedAt":%q,"observedGeneration":1,"conditions":[{"type":"Ready","status":"True","reason":"Synced",`+
		`"message":"synced to the Polycrate API as 00000000-0000-4000-8000-%012d","lastTransitionTime":%q,"observedGeneration":1}]}}`,
		i, i, now, i, now)
	return c.Status().Patch(ctx, ep, client.RawPatch("application/merge-patch+json", []byte(status)), client.FieldOwner("polycrate-operator"))
}

// syncOnce builds the operator's manager, syncs its cache's Endpoint informer
// and prints the sample as JSON.
func syncOnce(kubeconfig, mode string, stream bool) error {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return err
	}
	mgr, err := manager.New(cfg, manager.Options{MetricsBindAddress: "0", HealthProbeBindAddress: "0", StreamEndpointList: stream})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if cpuProfileDir != "" {
		f, err := os.Create(filepath.Join(cpuProfileDir, profileName(mode)+".pprof"))
		if err != nil {
			return err
		}
		defer func() { _ = f.Close() }()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	start, cpu0 := time.Now(), cpuSeconds()
	if _, err := mgr.GetCache().GetInformer(ctx, &v1.Endpoint{}); err != nil {
		return err
	}
	go func() { _ = mgr.GetCache().Start(ctx) }()
	if !mgr.GetCache().WaitForCacheSync(ctx) {
		return fmt.Errorf("the cache did not sync")
	}
	s := sample{Mode: mode, Seconds: time.Since(start).Seconds(), CPUSeconds: cpuSeconds() - cpu0, PeakRSSMiB: peakRSSMiB()}
	return json.NewEncoder(os.Stdout).Encode(s)
}

// profileName is a mode's name as a file name.
func profileName(mode string) string {
	return strings.NewReplacer(" ", "-", "(", "", ")", "", ",", "").Replace(mode)
}

// apiServerProfile writes the kube-apiserver's CPU profile of the next
// apiServerProfileSeconds (its /debug/pprof, on by default) to path.
func apiServerProfile(cfg *rest.Config, path string) error {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	raw, err := cs.RESTClient().Get().AbsPath("/debug/pprof/profile").
		Param("seconds", fmt.Sprint(apiServerProfileSeconds)).Timeout((apiServerProfileSeconds + 30) * time.Second).DoRaw(context.Background())
	if err != nil {
		return err
	}
	return os.WriteFile(path, raw, 0o644)
}

// apiServerProfileSeconds covers a child's start and sync.
const apiServerProfileSeconds = 10

func cpuSeconds() float64 {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}

// peakRSSMiB is the process's VmHWM (ru_maxrss is in KiB on Linux).
func peakRSSMiB() float64 {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return float64(ru.Maxrss) / 1024
}
