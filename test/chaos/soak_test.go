package chaos

import (
	"bufio"
	"encoding/csv"
	"fmt"
	"html"
	"io"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/polycrate/polycrate-operator/api/v1alpha1"
	"github.com/polycrate/polycrate-operator/internal/testutil/faultproxy"
)

// The soak: two replicas with leader election run for -chaos.soak (make soak:
// 30 min; make test: 3 min) while Ingresses are created, changed and deleted at
// a fixed rate, the Polycrate API browns out (503 on half the requests)
// periodically, the leader is handed over (SIGTERM, as a rolling update does),
// and the agent monitors hundreds of endpoints. Each replica's RSS, live heap
// (after a forced GC), goroutines and open file descriptors are sampled, with
// its role (leader or standby) at the sample; the soak fails on an upward trend
// — the least-squares slope over the second half of a replica's samples in one
// role above a bound — or on any lost, duplicated or orphaned object at the end.
// A standby that takes over starts its controllers, informers and agent: a
// step of some 500 goroutines and tens of MiB, once, which is no trend; so each
// role's span of a replica is judged on its own. It writes the samples (CSV)
// and a plot (SVG).

// soakPlan is the cadence and bounds of one soak.
type soakPlan struct {
	sample, churn                time.Duration
	brownoutEvery, brownoutFor   time.Duration
	handoverEvery                time.Duration
	ingresses, monitored         int
	minSamples                   int
	rss, heap, goroutines, files float64 // bounds of the slopes, per minute (MiB, MiB, count, count)
}

func soakPlanFor(d time.Duration) soakPlan {
	if d >= 20*time.Minute {
		// make soak: the cadence. Bounds: what a leak of one object
		// per Ingress change or per check would exceed (a 1 KiB leak per check
		// of 500 endpoints every 30 s is 1 MiB/min).
		return soakPlan{sample: time.Minute, churn: time.Second, brownoutEvery: 5 * time.Minute, brownoutFor: 30 * time.Second,
			handoverEvery: 10 * time.Minute, ingresses: 200, monitored: 500, minSamples: 8,
			rss: 2, heap: 1, goroutines: 2, files: 0.5}
	}
	// make test: every fault at least once in 3 minutes, sampled every 10 s.
	// A replica's second half is then about 90 s, where GC and warm-up noise
	// dominate: the bounds catch gross leaks only (a goroutine or a descriptor
	// per check of 100 endpoints would be 200 per minute).
	return soakPlan{sample: 10 * time.Second, churn: 500 * time.Millisecond, brownoutEvery: d / 3, brownoutFor: 15 * time.Second,
		handoverEvery: d / 2, ingresses: 40, monitored: 100,
		rss: 24, heap: 12, goroutines: 40, files: 20, minSamples: 6}
}

// soakSample is one sample of one replica.
type soakSample struct {
	at                           time.Duration
	proc                         string
	leads                        bool // the replica held the Lease
	rss, heap, goroutines, files float64
}

// replica is one operator process of the soak.
type replica struct {
	*proc
	pprof string
}

func (r *replica) sample(at time.Duration) (soakSample, bool) {
	s := soakSample{at: at, proc: r.name}
	pid := r.cmd.Process.Pid
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return s, false
	}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 64)
			s.rss = kb / 1024
		}
	}
	_ = f.Close()
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return s, false
	}
	s.files = float64(len(fds))
	// The live heap: right after a forced GC.
	c := http.Client{Timeout: 10 * time.Second}
	resp, err := c.Get("http://" + r.pprof + "/debug/pprof/heap?gc=1")
	if err != nil {
		return s, false
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	heap, ok1 := r.metric("go_memstats_heap_alloc_bytes")
	gor, ok2 := r.metric("go_goroutines")
	s.heap, s.goroutines = heap/(1<<20), gor
	s.leads = r.leads()
	return s, ok1 && ok2
}

// saveGoroutines keeps the replica's goroutines (pprof, grouped by stack) at
// every sample (goroutines-<replica>-<seconds into the soak>.txt), and as
// -first and -last: a rising count names its stacks by their difference.
func (r *replica) saveGoroutines(dir string, at time.Duration) {
	c := http.Client{Timeout: 10 * time.Second}
	resp, err := c.Get("http://" + r.pprof + "/debug/pprof/goroutine?debug=1")
	if err != nil {
		return
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return
	}
	_ = os.WriteFile(filepath.Join(dir, fmt.Sprintf("goroutines-%s-%04d.txt", r.name, int(at.Seconds()))), b, 0o644)
	first := filepath.Join(dir, "goroutines-"+r.name+"-first.txt")
	if _, err := os.Stat(first); os.IsNotExist(err) {
		_ = os.WriteFile(first, b, 0o644)
		return
	}
	_ = os.WriteFile(filepath.Join(dir, "goroutines-"+r.name+"-last.txt"), b, 0o644)
}

// grownStacks names the goroutine stacks (by their two innermost functions
// outside the runtime)
// whose count grew most between two samples of one replica, from the profiles
// saveGoroutines kept: a failing trend says what rose, in CI's output too.
func grownStacks(dir string, from, to soakSample) string {
	count := func(s soakSample) map[string]int {
		b, err := os.ReadFile(filepath.Join(dir, fmt.Sprintf("goroutines-%s-%04d.txt", s.proc, int(s.at.Seconds()))))
		if err != nil {
			return nil
		}
		out := map[string]int{}
		for _, block := range strings.Split(string(b), "\n\n") {
			lines := strings.Split(strings.TrimSpace(block), "\n")
			n, err := strconv.Atoi(strings.Fields(lines[0] + " x")[0])
			if err != nil {
				continue
			}
			var fns []string
			for _, l := range lines[1:] {
				if f := strings.Fields(l); len(f) >= 3 && f[0] == "#" && len(fns) < 2 {
					fn, _, _ := strings.Cut(f[2], "+0x")
					if !strings.HasPrefix(fn, "runtime.") && !strings.HasPrefix(fn, "internal/") && !strings.HasPrefix(fn, "sync.") {
						fns = append(fns, fn)
					}
				}
			}
			out[strings.Join(fns, " < ")] += n
		}
		return out
	}
	a, b := count(from), count(to)
	if b == nil {
		return "no profiles"
	}
	type grown struct {
		stack string
		by    int
	}
	var gs []grown
	for k, n := range b {
		if n > a[k] {
			gs = append(gs, grown{k, n - a[k]})
		}
	}
	sort.Slice(gs, func(i, j int) bool { return gs[i].by > gs[j].by })
	var parts []string
	for _, g := range gs[:min(5, len(gs))] {
		parts = append(parts, fmt.Sprintf("+%d %s", g.by, g.stack))
	}
	return strings.Join(parts, "; ")
}

// slope is the least-squares slope of ys over xs.
func slope(xs, ys []float64) float64 {
	n := float64(len(xs))
	var sx, sy, sxx, sxy float64
	for i := range xs {
		sx += xs[i]
		sy += ys[i]
		sxx += xs[i] * xs[i]
		sxy += xs[i] * ys[i]
	}
	d := n*sxx - sx*sx
	if d == 0 {
		return 0
	}
	return (n*sxy - sx*sy) / d
}

var _ = Describe("the soak", Ordered, func() {
	BeforeAll(clearWork)

	It("runs without an upward trend in memory, goroutines or descriptors, and loses nothing", func() {
		d := *flagSoak
		plan := soakPlanFor(d)
		out := *flagSoakOut
		if out == "" {
			out = GinkgoT().TempDir()
		}
		Expect(os.MkdirAll(out, 0o755)).To(Succeed())

		// What the agent checks: a local target, and Endpoint CRs pointing at it.
		// One host per endpoint (127.0.x.y: the whole of 127/8 is loopback, and
		// the target listens on every address): the operator names an API
		// endpoint by namespace and host.
		var hits atomic.Int64
		target := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { hits.Add(1) }))
		l, err := net.Listen("tcp", ":0")
		Expect(err).NotTo(HaveOccurred())
		target.Listener = l
		target.Start()
		defer target.Close()
		port := l.Addr().(*net.TCPAddr).Port
		monNS := soakNS
		Expect(client.IgnoreAlreadyExists(k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: monNS}}))).To(Succeed())
		for i := range plan.monitored {
			Expect(k8s.Create(ctx, &v1.Endpoint{ObjectMeta: metav1.ObjectMeta{Namespace: monNS, Name: fmt.Sprintf("target-%04d", i)},
				Spec: v1.EndpointSpec{DisplayName: fmt.Sprintf("soak target %d", i), RemoteAddress: fmt.Sprintf("127.0.%d.%d", 1+i/250, 1+i%250), RemotePort: int32(port),
					Kind: "http", TLS: ptr.To(false), Path: fmt.Sprintf("/t/%d", i), Timeout: 5, Interval: 30}})).To(Succeed())
		}
		setMonitoring := func(on bool) {
			Eventually(func() error {
				oc := &v1.OperatorConfig{}
				if err := k8s.Get(ctx, client.ObjectKey{Namespace: opNS, Name: v1.DefaultOperatorConfigName}, oc); err != nil {
					return err
				}
				oc.Spec.EndpointMonitoring.Enabled = ptr.To(on)
				return k8s.Update(ctx, oc)
			}, 30*time.Second, 200*time.Millisecond).Should(Succeed())
		}
		setMonitoring(true)

		gen := 0
		startReplica := func() *replica {
			gen++
			pp := freeAddr()
			return &replica{proc: startWith(fmt.Sprintf("soak-%d", gen), true, kcfg, "--pprof-bind-address", pp), pprof: pp}
		}
		replicas := []*replica{startReplica(), startReplica()}
		defer func() {
			for _, r := range replicas {
				r.stop()
			}
		}()
		leader := func() *replica {
			for _, r := range replicas {
				if r.running() && r.leads() {
					return r
				}
			}
			return nil
		}
		Eventually(leader, time.Minute, 200*time.Millisecond).ShouldNot(BeNil())
		connected()

		// The churn: one change per tick, around plan.ingresses Ingresses.
		var (
			mu      sync.Mutex
			live    []string
			counter int
			changes int
		)
		stopChurn := make(chan struct{})
		churned := make(chan struct{})
		go func() {
			defer GinkgoRecover()
			defer close(churned)
			t := time.NewTicker(plan.churn)
			defer t.Stop()
			for {
				select {
				case <-stopChurn:
					return
				case <-t.C:
				}
				mu.Lock()
				r := rand.Float64()
				switch {
				case len(live) < plan.ingresses/2 || (r < 0.35 && len(live) < plan.ingresses):
					counter++
					name := fmt.Sprintf("soak-%05d", counter)
					Expect(k8s.Create(ctx, ingress(name, 1+rand.IntN(2)))).To(Succeed())
					live = append(live, name)
				case r < 0.7:
					i := rand.IntN(len(live))
					fresh := ingress(live[i], 1+rand.IntN(2))
					// The operator writes the Ingress too (its claim annotations): a
					// user's tool retries its update on a conflict.
					Expect(client.IgnoreNotFound(retry.RetryOnConflict(retry.DefaultRetry, func() error {
						ing := &networkingv1.Ingress{}
						if err := k8s.Get(ctx, client.ObjectKey{Namespace: workNS, Name: live[i]}, ing); err != nil {
							return err
						}
						ing.Spec.Rules = fresh.Spec.Rules
						return k8s.Update(ctx, ing)
					}))).To(Succeed())
				default:
					i := rand.IntN(len(live))
					Expect(client.IgnoreNotFound(k8s.Delete(ctx, &networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Namespace: workNS, Name: live[i]}}))).To(Succeed())
					live = append(live[:i], live[i+1:]...)
				}
				changes++
				mu.Unlock()
			}
		}()

		start := time.Now()
		var samples []soakSample
		brownouts, handovers := 0, 0
		nextBrownout, nextHandover := start.Add(plan.brownoutEvery), start.Add(plan.handoverEvery)
		var brownoutEnds time.Time
		nextSample := start
		for time.Since(start) < d {
			time.Sleep(time.Second)
			now := time.Now()
			if !brownoutEnds.IsZero() && now.After(brownoutEnds) {
				proxy.Set(nil)
				brownoutEnds = time.Time{}
			}
			if now.After(nextBrownout) && brownoutEnds.IsZero() {
				proxy.Set(&faultproxy.Fault{Status: 503, Rate: 0.5})
				brownoutEnds = now.Add(plan.brownoutFor)
				nextBrownout = nextBrownout.Add(plan.brownoutEvery)
				brownouts++
			}
			if now.After(nextHandover) && now.Before(start.Add(d-plan.sample)) {
				if l := leader(); l != nil {
					var standby *replica
					for _, r := range replicas {
						if r != l {
							standby = r
						}
					}
					l.stop() // SIGTERM: the Lease is released, the standby takes over
					Eventually(standby.leads, 15*time.Second, 100*time.Millisecond).Should(BeTrue(),
						"the standby %s did not take over from %s (logs in %s)", standby.name, l.name, dir)
					for i, r := range replicas {
						if r == l {
							replicas[i] = startReplica()
						}
					}
					handovers++
				}
				nextHandover = nextHandover.Add(plan.handoverEvery)
			}
			if !now.Before(nextSample) {
				for _, r := range replicas {
					if s, ok := r.sample(now.Sub(start)); ok && r.running() {
						samples = append(samples, s)
						r.saveGoroutines(out, now.Sub(start))
					}
				}
				nextSample = nextSample.Add(plan.sample)
			}
		}
		proxy.Set(nil)
		close(stopChurn)
		<-churned
		hitsDuringSoak := hits.Load()

		// Nothing lost, duplicated or orphaned.
		Eventually(leader, time.Minute, 200*time.Millisecond).ShouldNot(BeNil())
		after, s := converge(time.Now())

		// The trend of each replica in each role over the second half of
		// its samples in that role.
		type verdict struct {
			proc   string
			n      int
			slopes [4]float64
		}
		byProc := map[string][]soakSample{}
		for _, s := range samples {
			key := s.proc + " as standby"
			if s.leads {
				key = s.proc + " as leader"
			}
			byProc[key] = append(byProc[key], s)
		}
		bounds := [4]float64{plan.rss, plan.heap, plan.goroutines, plan.files}
		names := [4]string{"RSS MiB", "live heap MiB", "goroutines", "open files"}
		var verdicts []verdict
		var failures []string
		for proc, ss := range byProc {
			if len(ss) < plan.minSamples {
				continue
			}
			half := ss[len(ss)/2:]
			xs := make([]float64, len(half))
			series := [4][]float64{}
			for i, s := range half {
				xs[i] = s.at.Minutes()
				for j, v := range [4]float64{s.rss, s.heap, s.goroutines, s.files} {
					series[j] = append(series[j], v)
				}
			}
			v := verdict{proc: proc, n: len(ss)}
			for j := range series {
				v.slopes[j] = slope(xs, series[j])
				if v.slopes[j] > bounds[j] {
					failures = append(failures, fmt.Sprintf("%s: %s rises %.2f/min over the second half of its %d samples in that role (bound %.2f); stacks grown from %s to %s: %s",
						proc, names[j], v.slopes[j], len(ss), bounds[j], half[0].at.Round(time.Second), half[len(half)-1].at.Round(time.Second),
						grownStacks(out, half[0], half[len(half)-1])))
				}
			}
			verdicts = append(verdicts, v)
		}
		sort.Slice(verdicts, func(i, j int) bool { return verdicts[i].proc < verdicts[j].proc })
		Expect(writeSoakCSV(filepath.Join(out, "soak.csv"), samples)).To(Succeed())
		Expect(os.WriteFile(filepath.Join(out, "soak.svg"), []byte(soakSVG(samples, d)), 0o644)).To(Succeed())
		var slopes []string
		for _, v := range verdicts {
			slopes = append(slopes, fmt.Sprintf("%s (%d samples): RSS %+.2f MiB/min, heap %+.2f MiB/min, goroutines %+.1f/min, files %+.1f/min",
				v.proc, v.n, v.slopes[0], v.slopes[1], v.slopes[2], v.slopes[3]))
		}
		report := fmt.Sprintf("soak %s: %d Ingress changes, %d brownouts, %d handovers, %d monitored endpoints (%d checks answered); %s; plot %s",
			d, changes, brownouts, handovers, plan.monitored, hitsDuringSoak, strings.Join(slopes, "; "), filepath.Join(out, "soak.svg"))
		fmt.Fprintln(GinkgoWriter, report)
		AddReportEntry("soak", report)

		// Clean up what only the soak uses.
		setMonitoring(false)
		Expect(k8s.DeleteAllOf(ctx, &v1.Endpoint{}, client.InNamespace(monNS))).To(Succeed())
		Eventually(func() int {
			l := &v1.EndpointList{}
			Expect(k8s.List(ctx, l, client.InNamespace(monNS))).To(Succeed())
			return len(l.Items)
		}, 2*time.Minute, 500*time.Millisecond).Should(BeZero(), "the monitored Endpoints were not released")

		record(row{Scenario: "soak", Fault: fmt.Sprintf("%s: Ingress change every %s, 503 on half the API requests for %s every %s, leader handover every %s, %d endpoints monitored",
			d, plan.churn, plan.brownoutFor, plan.brownoutEvery, plan.handoverEvery, plan.monitored), Converge: after}, s)
		Expect(brownouts).To(BeNumerically(">=", 1))
		Expect(handovers).To(BeNumerically(">=", 1))
		Expect(hitsDuringSoak).To(BeNumerically(">=", int64(plan.monitored)), "the agent did not check every monitored endpoint")
		Expect(verdicts).NotTo(BeEmpty(), "no replica lived long enough to judge a trend")
		Expect(failures).To(BeEmpty(), "upward trends (samples, plot and each replica's goroutines at its first and last sample in %s)", out)
	})
})

func writeSoakCSV(path string, samples []soakSample) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := csv.NewWriter(f)
	_ = w.Write([]string{"minutes", "replica", "role", "rss_mib", "live_heap_mib", "goroutines", "open_files"})
	for _, s := range samples {
		role := "standby"
		if s.leads {
			role = "leader"
		}
		_ = w.Write([]string{strconv.FormatFloat(s.at.Minutes(), 'f', 2, 64), s.proc, role, strconv.FormatFloat(s.rss, 'f', 1, 64),
			strconv.FormatFloat(s.heap, 'f', 1, 64), strconv.FormatFloat(s.goroutines, 'f', 0, 64), strconv.FormatFloat(s.files, 'f', 0, 64)})
	}
	w.Flush()
	if err := w.Error(); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}

// soakSVG plots the four series, one panel each, a line per replica.
func soakSVG(samples []soakSample, d time.Duration) string {
	const w, ph, left, top = 860.0, 200.0, 70.0, 30.0
	colors := []string{"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf"}
	titles := []string{"RSS (MiB)", "live heap after GC (MiB)", "goroutines", "open file descriptors"}
	get := func(s soakSample, i int) float64 { return [4]float64{s.rss, s.heap, s.goroutines, s.files}[i] }
	var procs []string
	seen := map[string]bool{}
	for _, s := range samples {
		if !seen[s.proc] {
			seen[s.proc] = true
			procs = append(procs, s.proc)
		}
	}
	var b strings.Builder
	height := top + 4*(ph+50)
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" font-family="sans-serif" font-size="12">`+"\n", w, height)
	fmt.Fprintf(&b, `<text x="%.0f" y="18" font-size="14">Soak of %s: each replica's samples (x: minutes)</text>`+"\n", left, d)
	for i, p := range procs {
		fmt.Fprintf(&b, `<text x="%.0f" y="18" fill="%s">%s</text>`+"\n", w-90*float64(len(procs)-i), colors[i%len(colors)], html.EscapeString(p))
	}
	for panel := range 4 {
		y0 := top + float64(panel)*(ph+50) + 20
		lo, hi := math.Inf(1), math.Inf(-1)
		for _, s := range samples {
			lo, hi = math.Min(lo, get(s, panel)), math.Max(hi, get(s, panel))
		}
		if len(samples) == 0 {
			lo, hi = 0, 1
		}
		if hi-lo < 1 {
			hi = lo + 1
		}
		lo, hi = lo-(hi-lo)*0.05, hi+(hi-lo)*0.05
		fmt.Fprintf(&b, `<text x="%.0f" y="%.0f" font-weight="bold">%s</text>`+"\n", left, y0-6, titles[panel])
		fmt.Fprintf(&b, `<rect x="%.0f" y="%.0f" width="%.0f" height="%.0f" fill="none" stroke="#999"/>`+"\n", left, y0, w-left-20, ph)
		fmt.Fprintf(&b, `<text x="%.0f" y="%.0f" text-anchor="end">%.1f</text><text x="%.0f" y="%.0f" text-anchor="end">%.1f</text>`+"\n",
			left-4, y0+10, hi, left-4, y0+ph, lo)
		fmt.Fprintf(&b, `<text x="%.0f" y="%.0f" text-anchor="end">%.0f</text>`+"\n", w-20, y0+ph+14, d.Minutes())
		for i, p := range procs {
			var pts []string
			for _, s := range samples {
				if s.proc != p {
					continue
				}
				x := left + s.at.Minutes()/math.Max(d.Minutes(), 0.001)*(w-left-20)
				y := y0 + ph - (get(s, panel)-lo)/(hi-lo)*ph
				pts = append(pts, fmt.Sprintf("%.1f,%.1f", x, y))
			}
			fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="1.5" points="%s"/>`+"\n", colors[i%len(colors)], strings.Join(pts, " "))
		}
	}
	b.WriteString("</svg>\n")
	return b.String()
}
