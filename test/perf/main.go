// Command perf is the scale harness (docs/performance.md): one run starts envtest
// (a real kube-apiserver and etcd) and the Polycrate API emulator, generates the
// workload, runs the built operator binary as its own process, and measures, in
// the same run: the machine's write ceiling for the workload, convergence and its
// ratio to the ceiling, redundant writes after a restart, memory per cached Pod
// and Secret, propagation latency of annotation changes, and a write brownout.
// It prints a table and writes test/perf/out/results.json and convergence.svg.
//
//	go run ./test/perf [-sizes 1000,5000,20000] [-stop-after convergence] …
//
// Each size is a tier in a fresh control plane and emulator. A phase that fails
// or is skipped is printed as FAILED or SKIPPED with its reason, never as a
// figure; the exit status is 0 when every measured target held, 1 when one was
// missed, 2 when a phase failed.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crlog "sigs.k8s.io/controller-runtime/pkg/log"

	v1 "github.com/polycrate/polycrate-operator/api/v1alpha1"
	"github.com/polycrate/polycrate-operator/internal/emulator"
	"github.com/polycrate/polycrate-operator/internal/names"
	"github.com/polycrate/polycrate-operator/internal/polycrate"
	"github.com/polycrate/polycrate-operator/internal/testutil"
)

type config struct {
	sizes                                                                []int
	ingresses, hosts, pods, annotatedPods, secrets, changes, concurrency int
	podsPerIngress, secretsPerIngress                                    int
	restartWindow, brownout, timeout                                     time.Duration
	restartProfile, ceilingAfter                                         bool
	brownoutIngresses                                                    int
	out                                                                  string
	stopAfter, pprof, operatorArgs, cpuProfile                           string
}

// Results is what one tier (one size) measured. A figure counts only if the
// phase that measures it ended ok (Phases); the table never prints it otherwise.
type Results struct {
	Machine        string  `json:"machine"`
	Ingresses      int     `json:"ingresses"`
	Endpoints      int     `json:"endpoints"`
	Phases         []Phase `json:"phases"`
	CeilingSeconds float64 `json:"write_ceiling_seconds"`
	CeilingWrites  int     `json:"write_ceiling_writes"`
	// The control plane's CPU (kube-apiserver + etcd, this process's children)
	// during the ceiling and during convergence: where the operator's extra cost
	// over a bare client lands on a shared machine.
	CeilingServerCPU     float64 `json:"write_ceiling_server_cpu_seconds"`
	ConvergenceServerCPU float64 `json:"convergence_server_cpu_seconds"`
	OperatorK8sWrites    int     `json:"operator_k8s_writes_until_idle"`
	// OperatorK8sRequestsBy splits the operator's Kubernetes requests until idle
	// by method and status code ("PATCH 409", "GET 200"; watches included):
	// conflicts, retries and uncached reads show here.
	OperatorK8sRequestsBy map[string]int `json:"operator_k8s_requests_by_method_and_code,omitempty"`
	K8sWritesPerEndpoint  float64        `json:"operator_k8s_writes_per_endpoint"`
	OperatorCPUSeconds    float64        `json:"operator_cpu_seconds_until_idle"`
	ReconcilesPerEndpoint float64        `json:"operator_queue_adds_per_endpoint"`
	// QueueAddsPerEndpoint splits those adds by queue: which controller's
	// passes they are (discovery's requeues on its own and its Endpoints' events).
	QueueAddsPerEndpoint map[string]float64 `json:"operator_queue_adds_per_endpoint_by_queue,omitempty"`
	ConvergenceSeconds   float64            `json:"convergence_seconds"`
	ConvergenceRatio     float64            `json:"convergence_ratio_to_ceiling"`
	// ConvergenceIdleSeconds is the time from the operator's start until it was
	// idle: every work queue empty, the source annotations written too.
	ConvergenceIdleSeconds float64 `json:"convergence_idle_seconds"`
	// CeilingAfterSeconds is the write ceiling measured again right after the
	// convergence, the operator stopped; RatioToMeanCeiling is the convergence's
	// ratio to the mean of the two ceilings: reported beside the ratio, which
	// stays the one to the first (the second runs on the converged store, and
	// moved by -24 % to +42 % from the first: not a neutral measure of the
	// machine's drift).
	CeilingAfterSeconds float64 `json:"write_ceiling_after_seconds"`
	RatioToMeanCeiling  float64 `json:"convergence_ratio_to_mean_ceiling"`
	RestartAPIWrites    int     `json:"restart_api_writes"`
	RestartAgentWrites  int     `json:"restart_agent_writes"`
	RestartK8sWrites    int     `json:"restart_k8s_writes"`
	RestartIdleSeconds  float64 `json:"restart_idle_seconds"`
	// RestartReadySeconds: from the start to /readyz (the stores synced).
	RestartReadySeconds float64 `json:"restart_ready_seconds"`
	Pods                int     `json:"pods"`
	Secrets             int     `json:"secrets"`
	HeapBaseBytes       float64 `json:"heap_base_bytes"`
	// AppPods are the annotated Pods, created first, and HeapAppsBytes what they
	// added to the heap with the K8sApps they make (the same 100 apps at every
	// size: no cost per Pod). BytesPerPod is measured over the Pods after them.
	AppPods        int     `json:"app_pods"`
	HeapAppsBytes  float64 `json:"heap_apps_bytes"`
	BytesPerPod    float64 `json:"heap_bytes_per_pod"`
	BytesPerSecret float64 `json:"heap_bytes_per_secret"`
	RSSBytes       float64 `json:"operator_rss_bytes"`
	// The RSS split: anonymous memory (heap, stacks) and file-backed pages (the
	// binary's code and data that have been touched).
	RSSAnonBytes float64 `json:"operator_rss_anon_bytes"`
	RSSFileBytes float64 `json:"operator_rss_file_bytes"`
	// The process's peak RSS since its (re)start (VmHWM): what a memory limit
	// must hold, the bursts of the restart and of the Pods included.
	RSSPeakBytes float64 `json:"operator_rss_peak_bytes"`
	// How long the RSS took to settle at rest after the last work.
	RSSSettleSeconds float64 `json:"operator_rss_settle_seconds"`
	// The Go runtime's account of its memory when the RSS was read
	// (go_memstats_*_bytes: heap_alloc, heap_inuse, heap_idle, heap_released,
	// stack_inuse, mspan_inuse, gc_sys, other_sys, next_gc).
	MemStats                map[string]float64 `json:"operator_memstats,omitempty"`
	PropagationP50Ms        float64            `json:"propagation_p50_ms"`
	PropagationP99Ms        float64            `json:"propagation_p99_ms"`
	BrownoutSeconds         float64            `json:"brownout_seconds"`
	BrownoutRecoverySeconds float64            `json:"brownout_recovery_seconds"`
	BrownoutDuplicates      int                `json:"brownout_duplicates"`
	BrownoutExtraWriteCalls int                `json:"brownout_extra_write_calls"`
	ConvergenceTimeline     [][2]int64         `json:"convergence_timeline_ms_synced"`
	// ConvergenceQueueDepth is each work queue's mean depth during the
	// convergence (sampled every 2 s): the queue that stays full is the stage
	// that holds the convergence; a stage whose queue stays empty waits for the
	// one before it.
	ConvergenceQueueDepth map[string]float64 `json:"convergence_mean_queue_depth,omitempty"`
	Verdicts              []Verdict          `json:"verdicts"`
}

// Report is one run: a tier per size.
type Report struct {
	Started string     `json:"started"`
	Args    []string   `json:"args"`
	Tiers   []*Results `json:"tiers"`
	Exit    int        `json:"exit_status"`
}

func main() {
	c, err := parseFlags()
	if err != nil {
		fmt.Fprintln(os.Stderr, "perf:", err)
		os.Exit(2)
	}
	// envtest logs through controller-runtime's logger: nothing of it belongs in the tables.
	crlog.SetLogger(logr.Discard())
	stopProfile := func() {}
	if c.cpuProfile != "" {
		f, err := os.Create(c.cpuProfile)
		if err == nil && pprof.StartCPUProfile(f) == nil {
			// Stopped before the exit below (a deferred stop never runs past os.Exit).
			stopProfile = func() { pprof.StopCPUProfile(); _ = f.Close() }
		}
	}
	if err := os.MkdirAll(c.out, 0o755); err != nil {
		fmt.Fprintln(os.Stderr, "perf:", err)
		os.Exit(2)
	}
	rep := &Report{Started: time.Now().UTC().Format(time.RFC3339), Args: os.Args[1:]}
	bin, err := buildOperator(c.out)
	if err != nil {
		fmt.Fprintln(os.Stderr, "perf:", err)
		os.Exit(2)
	}
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	for _, n := range c.sizes {
		tc := c
		tc.ingresses = n
		if tc.pods == 0 {
			tc.pods = n * c.podsPerIngress
		}
		if tc.secrets == 0 {
			tc.secrets = n * c.secretsPerIngress
		}
		r, cleanup := runTier(ctx, tc, bin)
		r.Verdicts = verdicts(r)
		rep.Tiers = append(rep.Tiers, r)
		printTier(os.Stdout, r)
		// Written after every tier: a long run that dies later keeps what it measured.
		if werr := write(c.out, rep); werr != nil {
			fmt.Fprintln(os.Stderr, "perf:", werr)
		}
		step(fmt.Sprintf("%d Ingresses: stopping the operator, the control plane and the emulator", n))
		cleanup()
		if ctx.Err() != nil {
			break
		}
	}
	var table strings.Builder
	for _, r := range rep.Tiers {
		printTier(&table, r)
	}
	printGrowth(&table, rep.Tiers)
	printSummary(&table, rep.Tiers)
	rep.Exit = exitStatus(rep.Tiers)
	fmt.Print("\n" + table.String()[1:])
	if werr := write(c.out, rep); werr != nil {
		fmt.Fprintln(os.Stderr, "perf:", werr)
	}
	if werr := os.WriteFile(filepath.Join(c.out, "results.txt"), []byte(table.String()), 0o644); werr != nil {
		fmt.Fprintln(os.Stderr, "perf:", werr)
	}
	stopProfile()
	os.Exit(rep.Exit)
}

// parseFlags reads the command line.
func parseFlags() (config, error) {
	var c config
	var sizes string
	flag.StringVar(&sizes, "sizes", "", "comma-separated tiers of annotated Ingresses, each measured in a fresh control plane and emulator (e.g. 1000,5000,20000); empty: -ingresses")
	flag.IntVar(&c.ingresses, "ingresses", 5000, "annotated Ingresses present before the operator starts (one tier; -sizes for several)")
	flag.IntVar(&c.hosts, "hosts", 2, "hosts per Ingress")
	flag.IntVar(&c.podsPerIngress, "pods-per-ingress", 4, "Pods in the cluster for the memory phase, per Ingress of the tier")
	flag.IntVar(&c.secretsPerIngress, "secrets-per-ingress", 1, "unrelated 4 KiB Secrets for the memory phase, per Ingress of the tier")
	flag.IntVar(&c.pods, "pods", 0, "Pods for the memory phase (0: -pods-per-ingress × Ingresses)")
	flag.IntVar(&c.secrets, "secrets", 0, "Secrets for the memory phase (0: -secrets-per-ingress × Ingresses)")
	flag.IntVar(&c.annotatedPods, "annotated-pods", 300, "of the Pods, annotated polycrate_k8sapp_name (100 apps)")
	flag.IntVar(&c.changes, "changes", 200, "annotation changes for the propagation phase")
	flag.IntVar(&c.concurrency, "concurrency", 8, "concurrency of the bare-client write ceiling and of the workload's creation")
	flag.BoolVar(&c.ceilingAfter, "ceiling-after", true, "measure the write ceiling again after the convergence (the operator stopped; reported beside the ratio)")
	flag.BoolVar(&c.restartProfile, "restart-profile", false, "write the operator's CPU profile of a restart's first 12 s to restart-cpu-N.pb.gz (profiling costs a little CPU: off for the figures)")
	flag.DurationVar(&c.restartWindow, "restart-window", 2*time.Minute, "how long to count writes after a restart")
	flag.DurationVar(&c.brownout, "brownout", 60*time.Second, "how long the API fails every write in the brownout phase")
	flag.IntVar(&c.brownoutIngresses, "brownout-ingresses", 500, "Ingresses created for the brownout phase")
	flag.DurationVar(&c.timeout, "timeout", 0, "give up on a phase after this long (0: scaled to the tier, 5 min + 30 ms per Endpoint and 5 ms per Pod)")
	flag.StringVar(&c.stopAfter, "stop-after", "", "end each tier after this phase (convergence, restart, memory, propagation); empty runs all")
	flag.StringVar(&c.pprof, "pprof", "", "serve the operator's /debug/pprof on this address (e.g. 127.0.0.1:6060)")
	flag.StringVar(&c.operatorArgs, "operator-args", "", "extra flags for the operator, space-separated (the defaults are measured without)")
	flag.StringVar(&c.cpuProfile, "cpuprofile", "", "write the harness process's CPU profile (emulator included) to this file")
	flag.StringVar(&c.out, "out", filepath.Join("test", "perf", "out"), "where results.json, results.txt and convergence-<size>.svg go")
	flag.Parse()
	if sizes == "" {
		c.sizes = []int{c.ingresses}
	} else {
		for _, f := range strings.Split(sizes, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || n <= 0 {
				return c, fmt.Errorf("-sizes: %q is not a positive number", f)
			}
			c.sizes = append(c.sizes, n)
		}
	}
	switch c.stopAfter {
	case "", pConvergence, pRestart, pMemory, pPropagation:
	default:
		return c, fmt.Errorf("-stop-after %q: one of convergence, restart, memory, propagation", c.stopAfter)
	}
	return c, nil
}

func buildOperator(out string) (string, error) {
	step("building the operator binary")
	bin := filepath.Join(out, "polycrate-operator")
	if err := testutil.BuildOperator(bin, ""); err != nil {
		return "", err
	}
	return bin, nil
}

type harness struct {
	cfg config
	// stopEnv stops the tier's control plane and emulator.
	stopEnv func()
	k8s     client.Client
	rest    *rest.Config
	api     *emulator.Server
	apiURL  string
	bin     string
	kcfg    string
	op      *exec.Cmd
	opLog   *os.File
	mport   int
	// hport serves the operator's /readyz (its stores synced).
	hport int
	// pprofAddr is the operator's pprof address.
	pprofAddr string
}

// phaseTimeout is how long a phase may take: -timeout, or scaled to the tier.
func (c config) phaseTimeout() time.Duration {
	if c.timeout > 0 {
		return c.timeout
	}
	return 5*time.Minute + time.Duration(c.ingresses*c.hosts)*30*time.Millisecond + time.Duration(c.pods)*5*time.Millisecond
}

// runTier measures one size in a fresh control plane and emulator. Every phase
// records how it ended; after a phase fails, the phases that need its outcome
// are skipped with the reason.
func runTier(ctx context.Context, c config, bin string) (r *Results, cleanup func()) {
	r = &Results{Machine: fmt.Sprintf("%s/%s, %d CPUs, %s", runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), runtime.Version()),
		Ingresses: c.ingresses, Endpoints: c.ingresses * c.hosts, Pods: c.pods, Secrets: c.secrets}
	h := &harness{cfg: c, bin: bin}
	// Stopped after the tier's results are written (a hanging stop loses nothing).
	cleanup = func() {
		// The operator first: the emulator's Close waits for its open requests.
		h.stopOperator()
		if h.stopEnv != nil {
			h.stopEnv()
		}
	}
	t := &tierRun{ctx: ctx, c: c, r: r}
	if !t.phase(pSetup, h.startTier) {
		t.blocked = "setup failed"
	}
	t.phase(pCeiling, func(ctx context.Context) error { return t.ceiling(ctx, h, "before") })
	if !t.phase(pConvergence, func(ctx context.Context) error { return h.convergence(ctx, r) }) {
		t.blocked = "convergence failed"
	}
	// The ceiling again, right after, on the converged store: how far the
	// machine's pace and the store's growth moved the ceiling while the
	// operator converged (ceilings of the same tier 42–65 s within one hour
	// here). The operator is stopped (it would sync the ceiling's Endpoints);
	// the restart starts it.
	if c.ceilingAfter {
		t.phase(pCeilingAfter, func(ctx context.Context) error {
			step("stopping the operator; the write ceiling again, after the convergence")
			h.stopOperator()
			return t.ceiling(ctx, h, "after")
		})
	}
	r.setRatio()
	if t.stopped(pConvergence) {
		t.phase(pRestart, nil)
	} else if !t.phase(pRestart, func(ctx context.Context) error {
		step(fmt.Sprintf("restarting the operator; counting writes for %s", c.restartWindow))
		return h.restart(ctx, r)
	}) {
		t.blocked = "the restarted operator's state is unknown"
	}
	if t.stopped(pRestart) {
		t.phase(pMemory, nil)
	} else {
		t.phase(pMemory, func(ctx context.Context) error {
			step(fmt.Sprintf("memory: %d Pods (%d annotated) and %d Secrets of 4 KiB", c.pods, c.annotatedPods, c.secrets))
			return h.memory(ctx, r)
		})
	}
	if t.stopped(pMemory) {
		t.phase(pPropagation, nil)
	} else {
		t.phase(pPropagation, func(ctx context.Context) error {
			step(fmt.Sprintf("propagation of %d annotation changes", c.changes))
			return h.propagation(ctx, r)
		})
	}
	t.stopped(pPropagation)
	t.phase(pBrownout, func(ctx context.Context) error {
		step(fmt.Sprintf("brownout: %s of failing writes during the convergence of %d more Ingresses", c.brownout, c.brownoutIngresses))
		return h.brownoutPhase(ctx, r)
	})
	return r, cleanup
}

// tierRun runs a tier's phases in order: each ends ok, FAILED or SKIPPED with the
// reason, and a phase whose outcome the rest needs blocks them.
type tierRun struct {
	ctx     context.Context
	c       config
	r       *Results
	blocked string // why the remaining phases cannot run
}

// phase runs f (nil: skipped) with the phase timeout and records its outcome;
// it reports whether f ran and succeeded.
func (t *tierRun) phase(name string, f func(ctx context.Context) error) bool {
	if t.blocked != "" {
		t.r.Phases = append(t.r.Phases, Phase{Name: name, State: phaseSkipped, Reason: t.blocked})
		return false
	}
	if t.ctx.Err() != nil {
		t.blocked = "interrupted"
		t.r.Phases = append(t.r.Phases, Phase{Name: name, State: phaseSkipped, Reason: t.blocked})
		return false
	}
	pctx, cancel := context.WithTimeout(t.ctx, t.c.phaseTimeout())
	defer cancel()
	start := time.Now()
	err := f(pctx)
	p := Phase{Name: name, State: phaseOK, Seconds: time.Since(start).Seconds()}
	if err != nil {
		if pctx.Err() == context.DeadlineExceeded && t.ctx.Err() == nil {
			err = fmt.Errorf("did not finish within %s: %w", t.c.phaseTimeout(), err)
		}
		p.State, p.Reason = phaseFailed, err.Error()
		fmt.Fprintf(os.Stderr, "perf: %d Ingresses: %s FAILED: %v\n", t.c.ingresses, name, err)
	}
	t.r.Phases = append(t.r.Phases, p)
	return err == nil
}

// stopped: -stop-after names this phase, or the phases are blocked.
func (t *tierRun) stopped(after string) bool {
	if t.c.stopAfter == after {
		t.blocked = "-stop-after " + after
	}
	return t.blocked != ""
}

// ceiling measures the write ceiling (before or after the convergence) and
// removes its objects; if they stay, nothing after is valid.
func (t *tierRun) ceiling(ctx context.Context, h *harness, which string) error {
	if which == "before" {
		step("measuring the write ceiling with a bare client")
	}
	var err error
	cpu0 := testutil.ServerCPU()
	if which == "before" {
		t.r.CeilingSeconds, t.r.CeilingWrites, err = h.ceiling(ctx, which)
		t.r.CeilingServerCPU = testutil.ServerCPU() - cpu0
	} else {
		t.r.CeilingAfterSeconds, _, err = h.ceiling(ctx, which)
	}
	step("removing the ceiling's objects")
	if cerr := h.cleanCeiling(ctx); cerr != nil {
		// The operator must not see the ceiling's Endpoints: nothing after is valid.
		t.blocked = "the ceiling's objects could not be removed"
		return errors.Join(err, fmt.Errorf("cleanup: %w", cerr))
	}
	return err
}

// startTier starts envtest and the emulator, installs the CRDs, and creates the
// tier's Ingresses (stopped by h.stopEnv).
func (h *harness) startTier(ctx context.Context) error {
	step(fmt.Sprintf("%d Ingresses: starting envtest and the API emulator", h.cfg.ingresses))
	env, cfg, err := testutil.Start(testutil.Options{OwnCRDs: true})
	if err != nil {
		return err
	}
	h.stopEnv = func() { _ = env.Stop() }
	cfg.QPS, cfg.Burst = 500, 1000
	cfg.Timeout = 2 * time.Minute
	h.rest = cfg
	if h.k8s, err = client.New(cfg, client.Options{Scheme: testutil.Scheme()}); err != nil {
		return err
	}
	if h.api, err = emulator.New(emulator.Config{}); err != nil {
		return err
	}
	ts := httptest.NewServer(h.api.Handler())
	prev := h.stopEnv
	h.stopEnv = func() {
		ts.CloseClientConnections()
		done := make(chan struct{})
		go func() { ts.Close(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second): // a request still open: the process ends soon anyway
		}
		prev()
	}
	h.apiURL = ts.URL
	h.kcfg = filepath.Join(h.cfg.out, "kubeconfig")
	if err := os.WriteFile(h.kcfg, env.KubeConfig, 0o600); err != nil {
		return err
	}
	// The CRDs as the operator leaves them (its version annotation): otherwise its
	// first start updates all ten, and the convergence measured would carry the
	// API server's rebuild of their handlers — a cost of an upgrade, once.
	if out, err := exec.CommandContext(ctx, h.bin, "install-crds", "--kubeconfig", h.kcfg).CombinedOutput(); err != nil {
		return fmt.Errorf("install-crds: %v: %s", err, out)
	}
	if err := h.setup(ctx); err != nil {
		return err
	}
	step(fmt.Sprintf("creating %d Ingresses with %d hosts each", h.cfg.ingresses, h.cfg.hosts))
	return parallel(h.cfg.concurrency, h.cfg.ingresses, func(i int) error { return h.create(ctx, ingress("perf", i, h.cfg.hosts)) })
}

// convergence starts the operator and measures until the API holds every
// endpoint and the operator is idle: times, CPU, requests, queue adds.
func (h *harness) convergence(ctx context.Context, r *Results) error {
	step("starting the operator; convergence")
	start, cpu0 := time.Now(), testutil.ServerCPU()
	if err := h.startOperator(); err != nil {
		return err
	}
	timeline, depths, err := h.waitEndpoints(ctx, r.Endpoints, start)
	r.ConvergenceServerCPU = testutil.ServerCPU() - cpu0
	r.ConvergenceTimeline, r.ConvergenceQueueDepth = timeline, depths
	if err != nil {
		return err
	}
	r.ConvergenceSeconds = time.Since(start).Seconds()
	idle, err := h.waitIdle(ctx)
	if err != nil {
		return err
	}
	// The work that is not the API's objects (discovery's source annotations)
	// ends here: reported, so a change that moves work past the convergence
	// shows where it went.
	r.ConvergenceIdleSeconds = idle.Sub(start).Seconds()
	m, err := h.metrics()
	if err != nil {
		return err
	}
	r.OperatorK8sWrites = k8sWrites(m)
	r.OperatorK8sRequestsBy = k8sRequestsBy(m)
	step(fmt.Sprintf("the operator's Kubernetes requests by method and code: %v", r.OperatorK8sRequestsBy))
	r.K8sWritesPerEndpoint = float64(r.OperatorK8sWrites) / float64(r.Endpoints)
	r.ReconcilesPerEndpoint = sum(m, "workqueue_adds_total") / float64(r.Endpoints)
	r.QueueAddsPerEndpoint = byQueue(m, "workqueue_adds_total")
	for q, n := range r.QueueAddsPerEndpoint {
		r.QueueAddsPerEndpoint[q] = n / float64(r.Endpoints)
	}
	r.OperatorCPUSeconds = m["process_cpu_seconds_total"]
	return nil
}

// pause waits d (a measurement window), or until ctx ends.
func pause(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

func step(s string) { fmt.Printf("» %s (%s)\n", s, time.Now().Format("15:04:05")) }

// setup: the operator namespace, the token Secret and the OperatorConfig.
func (h *harness) setup(ctx context.Context) error {
	for _, ns := range []string{"polycrate", "perf", "ceiling", "pods", "secrets", "brownout"} {
		if err := h.create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			return err
		}
	}
	if err := h.create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "polycrate", Name: "polycrate-api-creds"},
		StringData: map[string]string{"token": emulator.DevAgentToken}}); err != nil {
		return err
	}
	oc := &v1.OperatorConfig{ObjectMeta: metav1.ObjectMeta{Namespace: "polycrate", Name: "default"}}
	oc.Spec.APISync.APIURL = h.apiURL
	oc.Spec.LocalCluster.ClusterName = "perf"
	// The harness measures discovery and the sync; its thousands of hosts do not
	// exist, and checking them would add the monitoring agent's CR writes to the
	// counts. Monitoring has its own benchmarks (docs/monitoring.md, "Performance").
	oc.Spec.EndpointMonitoring.Enabled = ptr.To(false)
	oc.Spec.ExternalDNSWebhook.Enabled = ptr.To(false) // not measured here; its fixed port stays free
	return h.create(ctx, oc)
}

func ingress(ns string, i, hosts int) *networkingv1.Ingress {
	ing := &networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("app-%05d", i),
		Annotations: map[string]string{"polycrate_endpoint_monitor": "true", "polycrate_endpoint_path": "/health"}}}
	for j := 0; j < hosts; j++ {
		ing.Spec.Rules = append(ing.Spec.Rules, networkingv1.IngressRule{Host: fmt.Sprintf("h%d.app-%05d.%s.example.com", j, i, ns)})
	}
	return ing
}

// parallel runs f(0..n-1) on `workers` goroutines and returns the first error.
func parallel(workers, n int, f func(int) error) error {
	var wg sync.WaitGroup
	var mu sync.Mutex
	var first error
	next := make(chan int)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				if err := f(i); err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
				}
			}
		}()
	}
	for i := 0; i < n; i++ {
		next <- i
	}
	close(next)
	wg.Wait()
	return first
}

// ceilingChunk is how many of the ceiling's Ingresses share a cleanup label:
// the cleanup deletes a chunk per request (one DeleteCollection of 10,000
// objects outlived the API server's request timeout on a busy machine).
const ceilingChunk = 250

// ceiling performs the Kubernetes writes the operator needs for the workload
// with a bare client: per Ingress two metadata patches, per host a server-side
// apply of the Endpoint and a status patch. Each call is retried on a
// transient error (the operator's own client retries too).
//
// round marks the Ingresses' patches: a second ceiling's patches must change
// them again (a patch that changes nothing is not written to etcd).
func (h *harness) ceiling(ctx context.Context, round string) (float64, int, error) {
	c := h.cfg
	start := time.Now()
	err := parallel(c.concurrency, c.ingresses, func(i int) error {
		ing := &networkingv1.Ingress{}
		if err := h.retry(ctx, func() error {
			return h.k8s.Get(ctx, client.ObjectKey{Namespace: "perf", Name: fmt.Sprintf("app-%05d", i)}, ing)
		}); err != nil {
			return err
		}
		for _, p := range []string{`{"metadata":{"labels":{"perf-ceiling-a":"` + round + `"}}}`, `{"metadata":{"annotations":{"perf-ceiling-b":"` + round + `"}}}`} {
			if err := h.retry(ctx, func() error {
				return h.k8s.Patch(ctx, ing, client.RawPatch("application/merge-patch+json", []byte(p)))
			}); err != nil {
				return err
			}
		}
		for j := 0; j < c.hosts; j++ {
			// The operator declares an Endpoint with server-side apply (labels, owner,
			// finalizer, the spec but for the fields at the CRD's default: here all but
			// the names and the path annotation), then patches its status: so does
			// the ceiling. No finalizer here, so the cleanup deletes at once.
			host := fmt.Sprintf("h%d.app-%05d.example.com", j, i)
			ep := &unstructured.Unstructured{Object: map[string]any{
				"apiVersion": v1.GroupVersion.String(), "kind": "Endpoint",
				"metadata": map[string]any{"name": fmt.Sprintf("h%d-app-%05d", j, i), "namespace": "ceiling",
					"labels": map[string]any{"perf-ceiling/discovered": "true", "perf-ceiling/ingress": ing.Name,
						"perf-ceiling/chunk": strconv.Itoa(i / ceilingChunk)},
					"ownerReferences": []any{map[string]any{"apiVersion": "networking.k8s.io/v1", "kind": "Ingress",
						"name": ing.Name, "uid": string(ing.UID)}}},
				"spec": map[string]any{"displayName": host, "remoteAddress": host, "path": "/health"},
			}}
			if err := h.retry(ctx, func() error {
				return h.k8s.Apply(ctx, client.ApplyConfigurationFromUnstructured(ep.DeepCopy()), client.FieldOwner("perf-ceiling"), client.ForceOwnership)
			}); err != nil {
				return err
			}
			// The status the sync writes: phase, id, hash, time, generation, Ready.
			now := time.Now().UTC().Format(time.RFC3339)
			status := fmt.Sprintf(`{"status":{"phase":"Synced","apiID":"00000000-0000-4000-8000-%012d","configHash":"%016x",`+
				`"lastSyncedAt":%q,"observedGeneration":1,"conditions":[{"type":"Ready","status":"True","reason":"Synced",`+
				`"message":"synced to the Polycrate API as 00000000-0000-4000-8000-%012d","lastTransitionTime":%q,"observedGeneration":1}]}}`,
				i*c.hosts+j, i*c.hosts+j, now, i*c.hosts+j, now)
			if err := h.retry(ctx, func() error {
				return h.k8s.Status().Patch(ctx, ep, client.RawPatch("application/merge-patch+json", []byte(status)))
			}); err != nil {
				return err
			}
		}
		return nil
	})
	return time.Since(start).Seconds(), c.ingresses * (2 + 2*c.hosts), err
}

// cleanCeiling removes the ceiling's Endpoints a chunk per request and its
// marks from the Ingresses, and waits until none of its Endpoints is left: the
// operator must not see them.
func (h *harness) cleanCeiling(ctx context.Context) error {
	c := h.cfg
	chunks := (c.ingresses + ceilingChunk - 1) / ceilingChunk
	if err := parallel(2, chunks, func(i int) error {
		return h.retry(ctx, func() error {
			return h.k8s.DeleteAllOf(ctx, &v1.Endpoint{}, client.InNamespace("ceiling"),
				client.MatchingLabels{"perf-ceiling/chunk": strconv.Itoa(i)})
		})
	}); err != nil {
		return err
	}
	if err := parallel(c.concurrency, c.ingresses, func(i int) error {
		ing := &networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Namespace: "perf", Name: fmt.Sprintf("app-%05d", i)}}
		return h.retry(ctx, func() error {
			return h.k8s.Patch(ctx, ing, client.RawPatch("application/merge-patch+json",
				[]byte(`{"metadata":{"labels":{"perf-ceiling-a":null},"annotations":{"perf-ceiling-b":null}}}`)))
		})
	}); err != nil {
		return err
	}
	for {
		left := &v1.EndpointList{}
		err := h.k8s.List(ctx, left, client.InNamespace("ceiling"), client.Limit(1))
		if err == nil && len(left.Items) == 0 {
			return nil
		}
		if perr := pause(ctx, time.Second); perr != nil {
			if err == nil {
				err = fmt.Errorf("%d+ of the ceiling's Endpoints are left", len(left.Items))
			}
			return fmt.Errorf("%w (%v)", perr, err)
		}
	}
}

// retry runs one of the harness's own calls until it succeeds, with backoff
// (0.5 s doubling to 8 s, 8 attempts), unless the error is one a retry cannot
// change (invalid, forbidden, a conflict of a create) or ctx ends. A busy API
// server drops streams and times out; the harness must not take that for a
// result.
func (h *harness) retry(ctx context.Context, f func() error) error {
	wait := 500 * time.Millisecond
	var err error
	for attempt := 1; ; attempt++ {
		if err = f(); err == nil || !transient(err) || attempt == 8 {
			return err
		}
		if perr := pause(ctx, wait); perr != nil {
			return fmt.Errorf("%w (last error: %v)", perr, err)
		}
		wait = min(2*wait, 8*time.Second)
	}
}

func transient(err error) bool {
	switch {
	case apierrors.IsInvalid(err), apierrors.IsForbidden(err), apierrors.IsUnauthorized(err), apierrors.IsBadRequest(err),
		apierrors.IsNotFound(err), apierrors.IsAlreadyExists(err), apierrors.IsMethodNotSupported(err),
		errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return false
	}
	return true
}

// create creates obj, retrying; an AlreadyExists after a retry means an
// earlier attempt's answer was lost, not a conflict.
func (h *harness) create(ctx context.Context, obj client.Object) error {
	first := true
	return h.retry(ctx, func() error {
		err := h.k8s.Create(ctx, obj.DeepCopyObject().(client.Object))
		if !first && apierrors.IsAlreadyExists(err) {
			return nil
		}
		first = false
		return err
	})
}

func (h *harness) startOperator() error {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	h.mport = l.Addr().(*net.TCPAddr).Port
	_ = l.Close()
	if l, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
		return err
	}
	h.hport = l.Addr().(*net.TCPAddr).Port
	_ = l.Close()
	logFile, err := os.OpenFile(filepath.Join(h.cfg.out, "operator.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	h.opLog = logFile
	h.op = exec.Command(h.bin, "run", "--kubeconfig", h.kcfg, "--namespace", "polycrate",
		"--metrics-bind-address", "127.0.0.1:"+strconv.Itoa(h.mport), "--metrics-secure=false", "--health-probe-bind-address", "127.0.0.1:"+strconv.Itoa(h.hport))
	h.op.Args = append(h.op.Args, strings.Fields(h.cfg.operatorArgs)...)
	// pprof serves the forced GC of the memory measurement (and profiles).
	h.pprofAddr = h.cfg.pprof
	if h.pprofAddr == "" {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return err
		}
		h.pprofAddr = l.Addr().String()
		_ = l.Close()
	}
	h.op.Args = append(h.op.Args, "--pprof-bind-address", h.pprofAddr)
	h.op.Stdout, h.op.Stderr = logFile, logFile
	h.op.Env = append(os.Environ(), "KUBECONFIG=")
	return h.op.Start()
}

func (h *harness) stopOperator() {
	if h.op == nil || h.op.Process == nil {
		return
	}
	_ = h.op.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _ = h.op.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(40 * time.Second):
		_ = h.op.Process.Kill()
		<-done
	}
	h.op = nil
	if h.opLog != nil {
		_ = h.opLog.Close()
	}
}

// waitEndpoints waits until the emulator holds want endpoints; it returns the
// timeline (ms since start, count) sampled every 500 ms, and each work queue's
// mean depth, sampled every 2 s from the operator's metrics.
func (h *harness) waitEndpoints(ctx context.Context, want int, start time.Time) ([][2]int64, map[string]float64, error) {
	var tl [][2]int64
	depths, samples := map[string]float64{}, 0
	mean := func() map[string]float64 {
		if samples == 0 {
			return nil
		}
		out := map[string]float64{}
		for q, d := range depths {
			out[q] = d / float64(samples)
		}
		return out
	}
	for i := 0; ; i++ {
		n := h.api.Live("endpoints")
		tl = append(tl, [2]int64{time.Since(start).Milliseconds(), int64(n)})
		if n >= want {
			return tl, mean(), nil
		}
		if i%4 == 0 {
			if m, err := h.metrics(); err == nil { // not up yet: no sample
				if q := queueDepths(m); len(q) > 0 {
					samples++
					for name, d := range q {
						depths[name] += d
					}
				}
			}
		}
		select {
		case <-ctx.Done():
			return tl, mean(), fmt.Errorf("%d of %d endpoints in the API after %s: %w", n, want, time.Since(start).Round(time.Second), ctx.Err())
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// queueDepths is workqueue_depth by queue name (the priority queue's depth is
// split by priority: summed).
func queueDepths(m map[string]float64) map[string]float64 { return byQueue(m, "workqueue_depth") }

// byQueue sums a work-queue metric by queue name.
func byQueue(m map[string]float64, metric string) map[string]float64 {
	out := map[string]float64{}
	for k, v := range m {
		rest, ok := strings.CutPrefix(k, metric+"{")
		if !ok {
			continue
		}
		_, name, ok := strings.Cut(rest, `name="`)
		if !ok {
			continue
		}
		name, _, _ = strings.Cut(name, `"`)
		out[name] += v
	}
	return out
}

// metrics scrapes the operator's /metrics into name{labels} → value.
func (h *harness) metrics() (map[string]float64, error) {
	return h.metricsNamed()
}

// metricsNamed reads the operator's metrics of these names (all without one).
func (h *harness) metricsNamed(names ...string) (map[string]float64, error) {
	q := url.Values{"name[]": names}
	resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/metrics?%s", h.mport, q.Encode()))
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err == nil {
			out[line[:i]] = v
		}
	}
	return out, sc.Err()
}

// k8sWrites sums the operator's write requests to the Kubernetes API (client-go's
// rest_client_requests_total; Events included).
func k8sWrites(m map[string]float64) int {
	t := 0.0
	for k, v := range m {
		if !strings.HasPrefix(k, "rest_client_requests_total{") {
			continue
		}
		for _, verb := range []string{"POST", "PUT", "PATCH", "DELETE"} {
			if strings.Contains(k, `method="`+verb+`"`) {
				t += v
			}
		}
	}
	return int(t)
}

// k8sRequestsBy counts the operator's Kubernetes requests by method and status
// code.
func k8sRequestsBy(m map[string]float64) map[string]int {
	out := map[string]int{}
	label := func(k, name string) string {
		i := strings.Index(k, name+`="`)
		if i < 0 {
			return ""
		}
		rest := k[i+len(name)+2:]
		return rest[:strings.IndexByte(rest, '"')]
	}
	for k, v := range m {
		if !strings.HasPrefix(k, "rest_client_requests_total{") {
			continue
		}
		out[label(k, "method")+" "+label(k, "code")] += int(v)
	}
	return out
}

func sum(m map[string]float64, prefix string) float64 {
	t := 0.0
	for k, v := range m {
		if strings.HasPrefix(k, prefix) {
			t += v
		}
	}
	return t
}

// waitIdle waits until the operator is ready (/readyz: its stores synced) and
// every work queue has been empty for 3 s in a row, and returns when that quiet
// began: the moment the operator went idle. The 3 s that confirm it are not
// part of the figure. It looks every 200 ms, at /readyz first and then at the
// work-queue depths alone (the metrics endpoint's name[] filter: a few lines,
// not every metric), so the figure is at most 0.2 s late; until 2026-12-03 it
// looked every 0.5 s at all the metrics. Not more often: a scrape still runs
// every collector, and the sync's phase counts walk every cached object (8 ms
// at 40,000 Endpoints) — at 100 ms that was a tenth of a core taken from the
// restart it measures.
func (h *harness) waitIdle(ctx context.Context) (time.Time, error) {
	var since time.Time // zero: not quiet
	start := time.Now()
	for {
		now := time.Now()
		ready := h.ready()
		var m map[string]float64
		var err error
		if ready {
			m, err = h.metricsNamed("workqueue_depth")
		}
		if ready && err == nil && len(m) > 0 && sum(m, "workqueue_depth") == 0 {
			if since.IsZero() {
				since = now
			}
			if now.Sub(since) >= 3*time.Second {
				return since, nil
			}
		} else {
			since = time.Time{}
		}
		select {
		case <-ctx.Done():
			return time.Time{}, fmt.Errorf("the operator was not idle after %s: %w", time.Since(start).Round(time.Second), ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// ready says whether the operator's /readyz answers 200.
func (h *harness) ready() bool {
	resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/readyz", h.hport))
	if err != nil {
		return false
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

func (h *harness) apiWrites() (ops, agent int) {
	for name, c := range h.api.Counters() {
		if strings.Contains(name, "agent") {
			agent += c.Writes
		} else {
			ops += c.Writes
		}
	}
	return ops, agent
}

func (h *harness) resourceVersions(ctx context.Context) (map[string]string, error) {
	out := map[string]string{}
	// Pages of 2,000 with retries: one list of 40,000 Endpoints is a long
	// request on a busy machine.
	eps := &v1.EndpointList{}
	for cont := ""; ; cont = eps.Continue {
		eps = &v1.EndpointList{}
		if err := h.retry(ctx, func() error { return h.k8s.List(ctx, eps, client.Limit(2000), client.Continue(cont)) }); err != nil {
			return nil, err
		}
		for _, e := range eps.Items {
			out["ep/"+e.Namespace+"/"+e.Name] = e.ResourceVersion
		}
		if eps.Continue == "" {
			break
		}
	}
	ings := &networkingv1.IngressList{}
	for cont := ""; ; cont = ings.Continue {
		ings = &networkingv1.IngressList{}
		if err := h.retry(ctx, func() error { return h.k8s.List(ctx, ings, client.Limit(2000), client.Continue(cont)) }); err != nil {
			return nil, err
		}
		for _, i := range ings.Items {
			out["ing/"+i.Namespace+"/"+i.Name] = i.ResourceVersion
		}
		if ings.Continue == "" {
			break
		}
	}
	return out, nil
}

func (h *harness) restart(ctx context.Context, r *Results) error {
	h.stopOperator()
	beforeRV, err := h.resourceVersions(ctx)
	if err != nil {
		return err
	}
	ops0, agent0 := h.apiWrites()
	start := time.Now()
	if err := h.startOperator(); err != nil {
		return err
	}
	// The CPU profile of the restart's first seconds (cache sync and the
	// resync's reconciles): what the idle figure is made of.
	profiled := make(chan struct{})
	if !h.cfg.restartProfile {
		close(profiled)
	} else {
		go func() {
			defer close(profiled)
			for i := 0; i < 100 && h.saveProfile("/debug/pprof/cmdline", os.DevNull) != nil; i++ {
				if pause(ctx, 50*time.Millisecond) != nil { // until the pprof server listens (≤ 5 s)
					return
				}
			}
			_ = h.saveProfile(fmt.Sprintf("/debug/pprof/profile?seconds=%d", 12), filepath.Join(h.cfg.out, fmt.Sprintf("restart-cpu-%d.pb.gz", h.cfg.ingresses)))
		}()
	}
	defer func() { <-profiled }()
	for !h.ready() {
		if err := pause(ctx, 100*time.Millisecond); err != nil {
			return fmt.Errorf("the operator was not ready after %s: %w", time.Since(start).Round(time.Second), err)
		}
	}
	r.RestartReadySeconds = time.Since(start).Seconds()
	idle, err := h.waitIdle(ctx)
	if err != nil {
		return err
	}
	r.RestartIdleSeconds = idle.Sub(start).Seconds()
	if err := pause(ctx, h.cfg.restartWindow-time.Since(start)); err != nil {
		return err
	}
	ops1, agent1 := h.apiWrites()
	r.RestartAPIWrites, r.RestartAgentWrites = ops1-ops0, agent1-agent0
	afterRV, err := h.resourceVersions(ctx)
	if err != nil {
		return err
	}
	for k, v := range afterRV {
		if beforeRV[k] != v {
			r.RestartK8sWrites++
		}
	}
	return nil
}

// heap forces a garbage collection in the operator (its pprof endpoint's
// heap?gc=1) and returns the live heap then (go_memstats_heap_alloc_bytes): the
// bytes reachable objects hold, without the garbage a quiet process keeps until
// its next GC.
func (h *harness) heap() (float64, error) {
	resp, err := http.Get("http://" + h.pprofAddr + "/debug/pprof/heap?gc=1")
	if err != nil {
		return 0, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	m, err := h.metrics()
	if err != nil {
		return 0, err
	}
	return m["go_memstats_heap_alloc_bytes"], nil
}

// settledHeap waits for idleness and reads the live heap three times, 3 s
// apart, keeping the lowest reading (short-lived memory of the last work fades).
func (h *harness) settledHeap(ctx context.Context) (float64, error) {
	if _, err := h.waitIdle(ctx); err != nil {
		return 0, err
	}
	low := 0.0
	for i := 0; i < 3; i++ {
		if i > 0 {
			if err := pause(ctx, 3*time.Second); err != nil {
				return 0, err
			}
		}
		v, err := h.heap()
		if err != nil {
			return 0, err
		}
		if i == 0 || v < low {
			low = v
		}
	}
	return low, nil
}

func (h *harness) memory(ctx context.Context, r *Results) error {
	c := h.cfg
	base, err := h.settledHeap(ctx)
	if err != nil {
		return err
	}
	r.HeapBaseBytes = base
	// The annotated Pods first: with them the operator makes the K8sApps (CRs,
	// their sync, their status), the same 100 at every size. Measured over all
	// Pods, that fixed cost read as 471 and 549 B per Pod at 1,000 Ingresses
	// (4,000 Pods), against 263 B at 5,000: a target missed by the
	// measurement, not by the Pods. The figure per Pod is taken over the Pods
	// after them.
	r.AppPods = min(c.annotatedPods, c.pods)
	if err := h.createPods(ctx, 0, r.AppPods); err != nil {
		return err
	}
	withApps, err := h.settledHeap(ctx)
	if err != nil {
		return err
	}
	r.HeapAppsBytes = withApps - base
	if err := h.createPods(ctx, r.AppPods, c.pods); err != nil {
		return err
	}
	withPods, err := h.settledHeap(ctx)
	if err != nil {
		return err
	}
	if plain := c.pods - r.AppPods; plain > 0 {
		r.BytesPerPod = (withPods - withApps) / float64(plain)
	} else if c.pods > 0 {
		// Every Pod annotated (-annotated-pods ≥ -pods): measured over all of
		// them, never a zero beside the target.
		r.BytesPerPod, r.AppPods, r.HeapAppsBytes = (withPods-base)/float64(c.pods), 0, 0
	}
	if r.BytesPerPod < 0 {
		return fmt.Errorf("the live heap shrank by %.0f B while %d Pods were added: the reading is noise, not a cost per Pod", withApps-withPods, c.pods-r.AppPods)
	}
	data := strings.Repeat("s", 4096)
	err = parallel(c.concurrency, c.secrets, func(i int) error {
		return h.create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "secrets", Name: fmt.Sprintf("secret-%05d", i)},
			StringData: map[string]string{"data": data}})
	})
	if err != nil {
		return err
	}
	withSecrets, err := h.settledHeap(ctx)
	if err != nil {
		return err
	}
	r.BytesPerSecret = (withSecrets - withPods) / float64(c.secrets)
	return h.memoryAtRest(ctx, r)
}

// createPods creates the memory phase's Pods [from, to).
func (h *harness) createPods(ctx context.Context, from, to int) error {
	c := h.cfg
	return parallel(c.concurrency, to-from, func(j int) error {
		i := from + j
		// A Deployment's Pod (owned by its ReplicaSet): the kind K8sApp status counts,
		// so the operator keeps every one of them.
		w := fmt.Sprintf("workload-%d", i%500)
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "pods", Name: fmt.Sprintf("%s-7d9f8c6b5-%05d", w, i),
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: w + "-7d9f8c6b5",
				UID: types.UID(fmt.Sprintf("00000000-0000-4000-8000-%012d", i%500)), Controller: ptr.To(true)}},
			Labels:      map[string]string{"app": w, "pod-template-hash": "7d9f8c6b5", "team": "platform", "tier": "backend"},
			Annotations: map[string]string{"prometheus.io/scrape": "true", "kubectl.kubernetes.io/last-applied-configuration": strings.Repeat("x", 2000)}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.example.com/app:1.0",
				Env: []corev1.EnvVar{{Name: "A", Value: strings.Repeat("v", 200)}, {Name: "B", Value: strings.Repeat("w", 200)}}}}}}
		if i < c.annotatedPods {
			p.Annotations["polycrate_k8sapp_name"] = fmt.Sprintf("app-%03d", i%100)
		}
		return h.create(ctx, p)
	})
}

// memoryAtRest reads the operator's RSS once it settled, its Go memory
// statistics, and its heap profiles.
func (h *harness) memoryAtRest(ctx context.Context, r *Results) error {
	c := h.cfg
	settled, err := restingRSS(ctx, h.op.Process.Pid)
	if err != nil {
		return err
	}
	r.RSSSettleSeconds = settled.Seconds()
	r.RSSBytes = rss(h.op.Process.Pid)
	r.RSSAnonBytes, r.RSSFileBytes = procStatus(h.op.Process.Pid, "RssAnon"), procStatus(h.op.Process.Pid, "RssFile")
	r.RSSPeakBytes = procStatus(h.op.Process.Pid, "VmHWM")
	if m, err := h.metrics(); err == nil {
		r.MemStats = map[string]float64{}
		for _, k := range []string{"heap_alloc", "heap_inuse", "heap_idle", "heap_released", "stack_inuse", "mspan_inuse", "gc_sys", "other_sys", "next_gc"} {
			r.MemStats[k] = m["go_memstats_"+k+"_bytes"]
		}
	}
	// The operator's live heap now, for `go tool pprof` (what the figures are made of).
	if err := h.saveHeapProfile(filepath.Join(c.out, fmt.Sprintf("heap-%d.pb.gz", c.ingresses))); err != nil {
		return err
	}
	// What the operator allocates at rest: 15 s with one metrics scrape, as a
	// Prometheus would make it, between two heap profiles taken right after a
	// collection (allocation samples are recorded at collections). The garbage
	// it makes lifts the resting RSS above the live heap between collections:
	// go tool pprof -sample_index=alloc_space -diff_base heap-N.pb.gz rest-N.pb.gz
	if err := pause(ctx, 5*time.Second); err != nil {
		return err
	}
	if _, err := h.metrics(); err != nil {
		return err
	}
	if err := pause(ctx, 10*time.Second); err != nil {
		return err
	}
	return h.saveHeapProfile(filepath.Join(c.out, fmt.Sprintf("rest-%d.pb.gz", c.ingresses)))
}

func (h *harness) saveHeapProfile(file string) error {
	return h.saveProfile("/debug/pprof/heap?gc=1", file)
}

// saveProfile writes one of the operator's pprof answers to file.
func (h *harness) saveProfile(path, file string) error {
	resp, err := http.Get("http://" + h.pprofAddr + path)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	return os.WriteFile(file, b, 0o644)
}

// Settling of the RSS at rest: sampled every second until it moved by less than
// 1 MiB over the last 12 s (more than two of the operator's 5 s looks at its
// free heap, kube.MemoryReleaser), at most 90 s.
const (
	rssSettleWindow = 12
	rssSettleMax    = 90 * time.Second
)

// restingRSS waits until the operator's RSS has settled, and says how long that
// took. An RSS that does not settle within rssSettleMax is an error: the
// figure would depend on the moment it was read.
func restingRSS(ctx context.Context, pid int) (time.Duration, error) {
	start := time.Now()
	var samples []float64
	for {
		samples = append(samples, rss(pid))
		if n := len(samples); n > rssSettleWindow {
			lo, hi := samples[n-1], samples[n-1]
			for _, v := range samples[n-1-rssSettleWindow:] {
				lo, hi = min(lo, v), max(hi, v)
			}
			if hi-lo < 1<<20 {
				return time.Since(start) - rssSettleWindow*time.Second, nil
			}
		}
		if time.Since(start) > rssSettleMax {
			return 0, fmt.Errorf("the operator's RSS did not settle at rest within %s: %.1f to %.1f MiB over the last %d s",
				rssSettleMax, slices.Min(samples[len(samples)-rssSettleWindow:])/(1<<20), slices.Max(samples[len(samples)-rssSettleWindow:])/(1<<20), rssSettleWindow)
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

// rss reads VmRSS of a process (Linux).
func rss(pid int) float64 { return procStatus(pid, "VmRSS") }

// procStatus reads one size field of /proc/PID/status in bytes (Linux).
func procStatus(pid int, field string) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, field+":") {
			f := strings.Fields(line)
			if len(f) >= 2 {
				kb, _ := strconv.ParseFloat(f[1], 64)
				return kb * 1024
			}
		}
	}
	return 0
}

// propagation changes the path annotation of Ingresses on an idle cluster and
// measures, per change, the time from the update to the API's updated_at of its
// endpoints (the emulator's clock is this process's).
func (h *harness) propagation(ctx context.Context, r *Results) error {
	c := h.cfg
	if _, err := h.waitIdle(ctx); err != nil {
		return err
	}
	api, err := polycrate.New(polycrate.Options{BaseURL: h.apiURL, Token: polycrate.StaticToken(emulator.DevAgentToken)})
	if err != nil {
		return err
	}
	type change struct {
		at  time.Time
		ids []string
	}
	changes := make([]change, 0, c.changes)
	for i := 0; i < c.changes && i < c.ingresses; i++ {
		ing := &networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Namespace: "perf", Name: fmt.Sprintf("app-%05d", i)}}
		var ids []string
		for j := 0; j < c.hosts; j++ {
			ep := &v1.Endpoint{}
			host := fmt.Sprintf("h%d.app-%05d.perf.example.com", j, i)
			if err := h.retry(ctx, func() error {
				return h.k8s.Get(ctx, client.ObjectKey{Namespace: "perf", Name: names.Endpoint(host)}, ep)
			}); err != nil {
				return err
			}
			ids = append(ids, ep.Status.APIID)
		}
		at := time.Now()
		patch := fmt.Sprintf(`{"metadata":{"annotations":{"polycrate_endpoint_path":"/health-%d"}}}`, i)
		if err := h.retry(ctx, func() error {
			return h.k8s.Patch(ctx, ing, client.RawPatch("application/merge-patch+json", []byte(patch)))
		}); err != nil {
			return err
		}
		changes = append(changes, change{at: at, ids: ids})
		if err := pause(ctx, 50*time.Millisecond); err != nil { // changes spread out, as on an idle cluster
			return err
		}
	}
	if _, err := h.waitIdle(ctx); err != nil {
		return err
	}
	var lat []float64
	for _, ch := range changes {
		worst := 0.0
		for _, id := range ch.ids {
			ep, err := api.Endpoints().Get(ctx, id)
			if err != nil {
				return err
			}
			if ep.UpdatedAt == nil {
				return fmt.Errorf("endpoint %s has no updated_at", id)
			}
			d := ep.UpdatedAt.Sub(ch.at).Seconds() * 1000
			if d > worst {
				worst = d
			}
		}
		lat = append(lat, worst)
	}
	sort.Float64s(lat)
	if len(lat) > 0 {
		r.PropagationP50Ms = lat[len(lat)/2]
		r.PropagationP99Ms = lat[min(len(lat)-1, int(float64(len(lat))*0.99))]
	}
	return nil
}

// brownoutPhase fails every API write for a while in the middle of a convergence.
func (h *harness) brownoutPhase(ctx context.Context, r *Results) error {
	c := h.cfg
	calls := func() int {
		n := 0
		for name, ctr := range h.api.Counters() {
			if name == "endpoints" {
				n += ctr.ByMethod["POST"] + ctr.ByMethod["PUT"] + ctr.ByMethod["PATCH"]
			}
		}
		return n
	}
	before := h.api.Live("endpoints")
	calls0 := calls()
	want := before + c.brownoutIngresses*c.hosts
	if err := parallel(c.concurrency, c.brownoutIngresses, func(i int) error {
		return h.create(ctx, ingress("brownout", i, c.hosts))
	}); err != nil {
		return err
	}
	if err := pause(ctx, 2*time.Second); err != nil { // the convergence is under way
		return err
	}
	if err := h.api.SetFaults(emulator.FaultRule{Path: "/api/v1/*", Method: "WRITE", Status: 503}); err != nil {
		return err
	}
	if err := pause(ctx, c.brownout); err != nil {
		return err
	}
	if err := h.api.SetFaults(); err != nil {
		return err
	}
	recovered := time.Now()
	if _, _, err := h.waitEndpoints(ctx, want, recovered); err != nil {
		return err
	}
	r.BrownoutSeconds = c.brownout.Seconds()
	r.BrownoutRecoverySeconds = time.Since(recovered).Seconds()
	r.BrownoutDuplicates = len(h.api.Collisions())
	r.BrownoutExtraWriteCalls = calls() - calls0 - c.brownoutIngresses*c.hosts
	return nil
}

func write(dir string, rep *Report) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	b, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "results.json"), b, 0o644); err != nil {
		return err
	}
	for _, r := range rep.Tiers {
		if len(r.ConvergenceTimeline) == 0 {
			continue
		}
		name := fmt.Sprintf("convergence-%d.svg", r.Ingresses)
		if err := os.WriteFile(filepath.Join(dir, name), []byte(svg(r.ConvergenceTimeline, r.Endpoints)), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// svg plots API objects synced over time.
func svg(tl [][2]int64, want int) string {
	const w, h, pad = 640.0, 320.0, 40.0
	var maxT int64 = 1
	for _, p := range tl {
		maxT = max(maxT, p[0])
	}
	var pts []string
	for _, p := range tl {
		x := pad + float64(p[0])/float64(maxT)*(w-2*pad)
		y := h - pad - float64(p[1])/float64(max(want, 1))*(h-2*pad)
		pts = append(pts, fmt.Sprintf("%.1f,%.1f", x, y))
	}
	return fmt.Sprintf(`<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f">
<rect width="100%%" height="100%%" fill="white"/>
<line x1="%.0f" y1="%.0f" x2="%.0f" y2="%.0f" stroke="black"/>
<line x1="%.0f" y1="%.0f" x2="%.0f" y2="%.0f" stroke="black"/>
<text x="%.0f" y="%.0f" font-size="12">time (s, 0–%.1f)</text>
<text x="4" y="%.0f" font-size="12">%d</text>
<text x="4" y="24" font-size="12">endpoints in the API</text>
<polyline fill="none" stroke="steelblue" stroke-width="2" points="%s"/>
</svg>
`, w, h, pad, h-pad, w-pad, h-pad, pad, pad, pad, h-pad, w/2-40, h-10, float64(maxT)/1000, pad+4, want, strings.Join(pts, " "))
}
