package chaos

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	v1 "github.com/polycrate/polycrate-operator/api/v1alpha1"
	"github.com/polycrate/polycrate-operator/internal/emulator"
	"github.com/polycrate/polycrate-operator/internal/testutil"
	"github.com/polycrate/polycrate-operator/internal/testutil/faultproxy"
)

const (
	opNS   = "polycrate"
	workNS = "chaos"
	// soakNS holds the soak's monitored Endpoint CRs.
	soakNS = "soak-monitored"
	domain = ".chaos.example.com"
)

var (
	ctx   = context.Background()
	sz    sizes
	env   *envtest.Environment
	k8s   client.Client
	api   *emulator.Server
	proxy *faultproxy.Proxy
	bin   string
	kcfg  string
	// restCfg is envtest's admin config (the Kubernetes fault proxy forwards with it).
	restCfg *rest.Config
	dir     string
	rows    []row
	// collisionsSeen is how many of the emulator's collisions earlier scenarios reported.
	collisionsSeen int
)

// row is one scenario's result.
type row struct {
	Scenario, Fault            string
	Lost, Duplicated, Orphaned int
	// RPM is the requests per minute that reached the proxy during the fault
	// ("" when the scenario has no fault window).
	RPM string
	// Converge is the time from the end of the fault (or the last restart) to
	// convergence.
	Converge time.Duration
	Takeover string
}

// proc is one operator process.
type proc struct {
	name    string
	cmd     *exec.Cmd
	done    chan struct{}
	metrics string
	exit    error
}

var _ = BeforeSuite(func() {
	sz = runSizes()
	dir = *flagLogs
	if dir == "" {
		dir = GinkgoT().TempDir()
	}
	Expect(os.MkdirAll(dir, 0o755)).To(Succeed())
	bin = filepath.Join(dir, "polycrate-operator")
	Expect(testutil.BuildOperator(bin, "")).To(Succeed())

	e, rc, err := testutil.Start(testutil.Options{OwnCRDs: true})
	Expect(err).NotTo(HaveOccurred())
	env = e
	restCfg = rest.CopyConfig(rc)
	rc.QPS, rc.Burst = 200, 400
	k8s, err = client.New(rc, client.Options{Scheme: testutil.Scheme()})
	Expect(err).NotTo(HaveOccurred())
	kcfg = filepath.Join(dir, "kubeconfig")
	Expect(os.WriteFile(kcfg, env.KubeConfig, 0o600)).To(Succeed())

	api, err = emulator.New(emulator.Config{})
	Expect(err).NotTo(HaveOccurred())
	upstream := httptest.NewServer(api.Handler())
	DeferCleanup(upstream.Close)
	proxy, err = faultproxy.New(upstream.URL, 23)
	Expect(err).NotTo(HaveOccurred())
	front := httptest.NewServer(proxy)
	DeferCleanup(front.Close)

	for _, ns := range []string{opNS, workNS} {
		Expect(k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
	}
	Expect(k8s.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: opNS, Name: "polycrate-api-creds"},
		StringData: map[string]string{"token": emulator.DevAgentToken}})).To(Succeed())
	oc := &v1.OperatorConfig{ObjectMeta: metav1.ObjectMeta{Namespace: opNS, Name: v1.DefaultOperatorConfigName}}
	oc.Spec.APISync.APIURL = front.URL
	oc.Spec.LocalCluster.ClusterName = "chaos"
	// The hosts do not exist: checking them would only add the monitoring
	// agent's requests to the counts.
	oc.Spec.EndpointMonitoring.Enabled = ptr.To(false)
	oc.Spec.ExternalDNSWebhook.Enabled = ptr.To(false)
	Expect(k8s.Create(ctx, oc)).To(Succeed())
})

var _ = AfterSuite(func() {
	if len(rows) > 0 {
		table := renderTable()
		fmt.Fprintln(GinkgoWriter, table)
		AddReportEntry("chaos results", table)
		if *flagOut != "" {
			Expect(os.MkdirAll(filepath.Dir(*flagOut), 0o755)).To(Succeed())
			Expect(os.WriteFile(*flagOut, []byte(table), 0o644)).To(Succeed())
		}
	}
	if env != nil {
		Expect(env.Stop()).To(Succeed())
	}
})

func renderTable() string {
	var b strings.Builder
	mode := "reduced run (`make test`)"
	if *flagFull {
		mode = "full run (`make chaos`)"
	}
	fmt.Fprintf(&b, "Chaos results, %s, %s:\n\n", mode, time.Now().UTC().Format("2006-01-02"))
	b.WriteString("| scenario | fault | lost | duplicated | orphaned | API requests/min during the fault | converged after | takeover |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|\n")
	for _, r := range rows {
		fmt.Fprintf(&b, "| %s | %s | %d | %d | %d | %s | %.1f s | %s |\n", r.Scenario, r.Fault, r.Lost, r.Duplicated, r.Orphaned,
			dash(r.RPM), r.Converge.Seconds(), dash(r.Takeover))
	}
	return b.String()
}

func dash(s string) string {
	if s == "" {
		return "—"
	}
	return s
}

func freeAddr() string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	Expect(err).NotTo(HaveOccurred())
	defer func() { _ = l.Close() }()
	return l.Addr().String()
}

// start runs an operator process; ha turns leader election on (short lease: a
// dead leader is replaced within about 5 s).
func start(name string, ha bool) *proc { return startWith(name, ha, kcfg) }

// startWith runs an operator process against the API server of kubeconfig,
// with extra flags.
func startWith(name string, ha bool, kubeconfig string, extra ...string) *proc {
	p := &proc{name: name, metrics: freeAddr(), done: make(chan struct{})}
	logFile, err := os.OpenFile(filepath.Join(dir, name+".log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	Expect(err).NotTo(HaveOccurred())
	args := []string{"run", "--kubeconfig", kubeconfig, "--namespace", opNS, "--install-crds=false",
		"--metrics-bind-address", p.metrics, "--metrics-secure=false", "--health-probe-bind-address", "0", "--graceful-shutdown-timeout", "5s"}
	if ha {
		args = append(args, "--leader-elect", "--leader-elect-lease-duration", "4s", "--leader-elect-renew-deadline", "3s",
			"--leader-elect-retry-period", "500ms")
	}
	p.cmd = exec.Command(bin, append(args, extra...)...)
	p.cmd.Env = append(os.Environ(), "KUBECONFIG=")
	// Should the test binary die (a timeout), its operators die with it.
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	p.cmd.Stdout, p.cmd.Stderr = logFile, logFile
	Expect(p.cmd.Start()).To(Succeed())
	go func() { p.exit = p.cmd.Wait(); _ = logFile.Close(); close(p.done) }()
	return p
}

func (p *proc) running() bool {
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// kill sends SIGKILL and waits for the process to end.
func (p *proc) kill() {
	if p.running() {
		_ = p.cmd.Process.Signal(syscall.SIGKILL)
	}
	<-p.done
}

// stop stops it cleanly (SIGTERM), or kills it.
func (p *proc) stop() {
	if p.running() {
		_ = p.cmd.Process.Signal(syscall.SIGCONT)
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
	}
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		p.kill()
	}
}

// metric reads one sample of the process's /metrics (false: unreadable or absent).
func (p *proc) metric(name string) (float64, bool) {
	c := http.Client{Timeout: time.Second}
	resp, err := c.Get("http://" + p.metrics + "/metrics")
	if err != nil {
		return 0, false
	}
	defer func() { _ = resp.Body.Close() }()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, name+" ") || strings.HasPrefix(line, name+"{") {
			f := strings.Fields(line)
			v, err := strconv.ParseFloat(f[len(f)-1], 64)
			return v, err == nil
		}
	}
	return 0, false
}

// leads: the process holds the Lease.
func (p *proc) leads() bool {
	v, ok := p.metric("leader_election_master_status")
	return ok && v == 1
}

// connected waits until the OperatorConfig says the operator is connected.
func connected() {
	Eventually(func(g Gomega) {
		oc := &v1.OperatorConfig{}
		g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: opNS, Name: v1.DefaultOperatorConfigName}, oc)).To(Succeed())
		c := meta.FindStatusCondition(oc.Status.Conditions, v1.ConditionReady)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Status).To(Equal(metav1.ConditionTrue), c.Message)
	}, 2*time.Minute, 250*time.Millisecond).Should(Succeed())
}

func ingress(name string, hosts int) *networkingv1.Ingress {
	ing := &networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Namespace: workNS, Name: name,
		Annotations: map[string]string{"polycrate_endpoint_monitor": "true"}}}
	for j := 0; j < hosts; j++ {
		ing.Spec.Rules = append(ing.Spec.Rules, networkingv1.IngressRule{Host: fmt.Sprintf("h%d.%s%s", j, name, domain)})
	}
	return ing
}

// createBatch creates n Ingresses named prefix-i, a few at a time.
func createBatch(prefix string, n int) {
	var wg sync.WaitGroup
	errs := make(chan error, n)
	sem := make(chan struct{}, 8)
	for i := 0; i < n; i++ {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			errs <- k8s.Create(ctx, ingress(fmt.Sprintf("%s-%04d", prefix, i), sz.hosts))
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		Expect(err).NotTo(HaveOccurred())
	}
}

// deleteSome deletes n random Ingresses that are not being deleted; it returns their names.
func deleteSome(n int) []string {
	list := &networkingv1.IngressList{}
	Expect(k8s.List(ctx, list, client.InNamespace(workNS))).To(Succeed())
	var live []networkingv1.Ingress
	for _, i := range list.Items {
		if i.DeletionTimestamp.IsZero() {
			live = append(live, i)
		}
	}
	rand.Shuffle(len(live), func(i, j int) { live[i], live[j] = live[j], live[i] })
	var names []string
	for _, i := range live[:min(n, len(live))] {
		Expect(client.IgnoreNotFound(k8s.Delete(ctx, &i))).To(Succeed())
		names = append(names, i.Name)
	}
	return names
}

// scan compares the cluster with the API: every host of every Ingress that is
// not being deleted must have exactly one live endpoint, and no live endpoint
// of the scenario's domain may lack its Ingress.
type scanResult struct {
	lost, duplicated, orphaned, want, deleting int
	// dups names the duplicates: hosts with more than one live endpoint, and
	// the emulator's collisions.
	dups []string
	// missing names up to three hosts the API lacks (sorted).
	missing []string
	// trace is how the convergence went (converge): each change of the counts,
	// with its time, so a slow one shows whether all were late or a few.
	trace []string
}

// converged: the API matches the cluster, and every deleted source is gone (its
// finalizer released once its API objects were deleted).
func (s scanResult) converged() bool {
	return s.lost == 0 && s.duplicated == 0 && s.orphaned == 0 && s.deleting == 0
}

func scan() scanResult {
	list := &networkingv1.IngressList{}
	Expect(k8s.List(ctx, list, client.InNamespace(workNS))).To(Succeed())
	want := map[string]bool{}
	var res scanResult
	for _, i := range list.Items {
		if !i.DeletionTimestamp.IsZero() {
			res.deleting++
			continue
		}
		for _, r := range i.Spec.Rules {
			want[r.Host] = true
		}
	}
	have := map[string]int{}
	for _, o := range api.LiveObjects("endpoints") {
		if addr, _ := o["remote_address"].(string); strings.HasSuffix(addr, domain) {
			have[addr]++
		}
	}
	res.want = len(want)
	for h := range want {
		if have[h] == 0 {
			res.lost++
			res.missing = append(res.missing, h)
		}
	}
	sort.Strings(res.missing)
	res.missing = res.missing[:min(3, len(res.missing))]
	for h, n := range have {
		if n > 1 {
			res.duplicated += n - 1
			res.dups = append(res.dups, fmt.Sprintf("%s ×%d", h, n))
		}
		if !want[h] {
			res.orphaned++
		}
	}
	// A duplicate the API held for a while also counts.
	cs := api.Collisions()
	for _, c := range cs[min(collisionsSeen, len(cs)):] {
		res.dups = append(res.dups, fmt.Sprintf("collision %s %s: %v at %s", c.Resource, c.Key, c.IDs, c.At.Format(time.RFC3339Nano)))
	}
	if c := len(cs) - collisionsSeen; c > res.duplicated {
		res.duplicated = c
	}
	return res
}

// clearWork gives a group of scenarios a clean slate while no operator runs:
// no Ingress of the scenarios and no Endpoint CR in the cluster
// (their finalizers dropped: no operator is there to release them), none of
// their endpoints in the API, and monitoring off. Each group measures its own
// yardstick, a fresh convergence, which must neither count nor resync what
// another group (in Ginkgo's random order) left behind.
func clearWork() {
	drop := func(o client.Object) {
		Expect(client.IgnoreNotFound(k8s.Delete(ctx, o))).To(Succeed())
		if len(o.GetFinalizers()) > 0 {
			Expect(client.IgnoreNotFound(k8s.Patch(ctx, o, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`))))).To(Succeed())
		}
	}
	ings := &networkingv1.IngressList{}
	Expect(k8s.List(ctx, ings, client.InNamespace(workNS))).To(Succeed())
	for i := range ings.Items {
		drop(&ings.Items[i])
	}
	// The Endpoint CRs discovery made from the Ingresses go too: envtest runs
	// no garbage collector to follow their owner references, and a next
	// operator would otherwise spend its scenario deleting them.
	eps := &v1.EndpointList{}
	for _, ns := range []string{workNS, soakNS} {
		Expect(k8s.List(ctx, eps, client.InNamespace(ns))).To(Succeed())
		for i := range eps.Items {
			drop(&eps.Items[i])
		}
	}
	Eventually(func(g Gomega) {
		g.Expect(k8s.List(ctx, ings, client.InNamespace(workNS))).To(Succeed())
		g.Expect(ings.Items).To(BeEmpty())
		for _, ns := range []string{workNS, soakNS} {
			g.Expect(k8s.List(ctx, eps, client.InNamespace(ns))).To(Succeed())
			g.Expect(eps.Items).To(BeEmpty(), "Endpoint CRs left in %s", ns)
		}
	}, time.Minute, 200*time.Millisecond).Should(Succeed())
	api.RemoveWhere("endpoints", func(d map[string]any) bool {
		addr, _ := d["remote_address"].(string)
		return strings.HasSuffix(addr, domain) || strings.HasPrefix(addr, "127.")
	})
	Eventually(func() error {
		oc := &v1.OperatorConfig{}
		if err := k8s.Get(ctx, client.ObjectKey{Namespace: opNS, Name: v1.DefaultOperatorConfigName}, oc); err != nil {
			return err
		}
		if !ptr.Deref(oc.Spec.EndpointMonitoring.Enabled, true) {
			return nil
		}
		oc.Spec.EndpointMonitoring.Enabled = ptr.To(false)
		return k8s.Update(ctx, oc)
	}, 30*time.Second, 200*time.Millisecond).Should(Succeed())
	collisionsSeen = len(api.Collisions())
}

// converge waits until the API matches the cluster and returns how long it took
// from `from`, and the scan. A duplicate never resolves: it fails at once.
func converge(from time.Time) (time.Duration, scanResult) {
	deadline := time.Now().Add(sz.converge)
	var trace []string
	last := ""
	for {
		s := scan()
		Expect(s.duplicated).To(BeZero(), "duplicates in the API: %v (logs in %s)", s.dups, dir)
		if now := fmt.Sprintf("lost %d %v, orphaned %d, deleting %d", s.lost, s.missing, s.orphaned, s.deleting); now != last {
			trace = append(trace, fmt.Sprintf("%.1f s: %s", time.Since(from).Seconds(), now))
			last = now
		}
		if s.converged() {
			s.trace = trace
			return time.Since(from), s
		}
		if time.Now().After(deadline) {
			Fail(fmt.Sprintf("no convergence within %s: %d of %d hosts lost, %d orphaned, %d Ingresses still deleting (logs in %s)",
				sz.converge, s.lost, s.want, s.orphaned, s.deleting, dir))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// record adds the row and checks the invariant of every scenario.
func record(r row, s scanResult) {
	r.Lost, r.Duplicated, r.Orphaned = s.lost, s.duplicated, s.orphaned
	rows = append(rows, r)
	collisionsSeen = len(api.Collisions())
	line := fmt.Sprintf("%s: lost %d, duplicated %d, orphaned %d, requests/min %s, converged after %.1f s, takeover %s",
		r.Scenario, r.Lost, r.Duplicated, r.Orphaned, dash(r.RPM), r.Converge.Seconds(), dash(r.Takeover))
	fmt.Fprintln(GinkgoWriter, line)
	AddReportEntry(r.Scenario, line)
	Expect(s.converged()).To(BeTrue(), line)
}

func perMinute(n int, d time.Duration) float64 { return float64(n) / d.Minutes() }

// window waits d (a fault's duration: a measurement window, not a wait for a state).
func window(d time.Duration) { time.Sleep(d) }

var _ = Describe("the operator under faults", Ordered, func() {
	var op *proc
	var fresh time.Duration

	BeforeAll(clearWork)
	AfterAll(func() {
		if op != nil {
			op.stop()
		}
	})

	It("converges a fresh set of changes (the outage scenario's yardstick)", func() {
		op = start("single", false)
		connected()
		t0 := time.Now()
		createBatch("fresh", sz.big)
		var s scanResult
		fresh, s = converge(t0)
		Expect(s.want).To(Equal(sz.big * sz.hosts))
		record(row{Scenario: "fresh convergence", Fault: "none", Converge: fresh}, s)
	})

	It("holds its requests back during a total outage, and converges after it within 1.2× a fresh convergence", func() {
		t0 := time.Now()
		proxy.Set(&faultproxy.Fault{Status: 503})
		createBatch("outage", sz.big) // the same changes as the fresh convergence, made during the outage
		var opened time.Time
		Eventually(func() bool { v, _ := op.metric("polycrate_api_circuit_open"); return v == 1 }, 30*time.Second, 100*time.Millisecond).Should(BeTrue(),
			"the circuit did not open")
		opened = time.Now()
		window(time.Until(t0.Add(sz.outage)))
		end := time.Now()
		proxy.Set(nil)
		total, open := proxy.Count(t0, end), proxy.Count(opened, end)
		openRPM := perMinute(open, end.Sub(opened))
		// At most one request per 5 s once open (+1: a probe may fall at either edge).
		Expect(open).To(BeNumerically("<=", int(end.Sub(opened)/(5*time.Second))+1), "requests while the circuit was open")
		after, s := converge(end)
		ratio := after.Seconds() / fresh.Seconds()
		fmt.Fprintf(GinkgoWriter, "outage: %d requests in %s (%d in the %s the circuit was open: %.1f/min); convergence after it %.1f s = %.2f× the fresh %.1f s\n",
			total, end.Sub(t0).Round(time.Second), open, end.Sub(opened).Round(time.Second), openRPM, after.Seconds(), ratio, fresh.Seconds())
		if *flagFull {
			Expect(ratio).To(BeNumerically("<=", 1.2), "convergence after the outage / fresh convergence")
		} else {
			// The reduced run's convergences take seconds, less than the breaker's
			// probe wait (at most 9.6 s): the ratio is asserted at full size.
			Expect(after).To(BeNumerically("<=", time.Duration(1.2*float64(fresh))+10*time.Second))
		}
		record(row{Scenario: "API outage", Fault: fmt.Sprintf("503 on every request for %s", sz.outage),
			RPM:      fmt.Sprintf("%.1f with the circuit open (%.1f over the whole outage); recovery %.2f× a fresh convergence", openRPM, perMinute(total, end.Sub(t0)), ratio),
			Converge: after}, s)
	})

	It("rides out 429 with Retry-After on half the writes", func() {
		t0 := time.Now()
		proxy.Set(&faultproxy.Fault{WritesOnly: true, Rate: 0.5, Status: 429, RetryAfter: 1})
		createBatch("throttled", sz.batch)
		deleteSome(sz.batch / 5)
		window(sz.window)
		end := time.Now()
		proxy.Set(nil)
		after, s := converge(end)
		record(row{Scenario: "throttling", Fault: fmt.Sprintf("429 + Retry-After: 1 on half the writes for %s", sz.window),
			RPM: fmt.Sprintf("%.0f", perMinute(proxy.Count(t0, end), end.Sub(t0))), Converge: after}, s)
	})

	It("rides out 5 s of latency on every answer", func() {
		t0 := time.Now()
		proxy.Set(&faultproxy.Fault{Latency: 5 * time.Second})
		createBatch("slow", sz.batch)
		deleteSome(sz.batch / 5)
		window(max(sz.window, 8*time.Second)) // longer than one answer's 5 s
		end := time.Now()
		proxy.Set(nil)
		after, s := converge(end)
		record(row{Scenario: "latency", Fault: "5 s on every answer", RPM: fmt.Sprintf("%.0f", perMinute(proxy.Count(t0, end), end.Sub(t0))),
			Converge: after}, s)
	})

	It("loses nothing to connection resets before the API saw a write, and duplicates nothing after it committed one", func() {
		t0 := time.Now()
		proxy.Set(&faultproxy.Fault{WritesOnly: true, Rate: 0.3, ResetBefore: true})
		createBatch("reset-before", sz.batch)
		deleteSome(sz.batch / 5)
		window(sz.window / 2)
		proxy.Set(&faultproxy.Fault{WritesOnly: true, Rate: 0.3, ResetAfter: true})
		createBatch("reset-after", sz.batch)
		deleteSome(sz.batch / 5) // deletes whose answer is lost: the retry finds the object gone
		window(sz.window / 2)
		end := time.Now()
		proxy.Set(nil)
		after, s := converge(end)
		record(row{Scenario: "connection resets", Fault: "RST on 30 % of the writes, before and (then) after the API committed them",
			RPM: fmt.Sprintf("%.0f", perMinute(proxy.Count(t0, end), end.Sub(t0))), Converge: after}, s)
	})

	It("survives kill -9 at random moments, with sources deleted while it is down", func() {
		for i := 0; i < sz.kills; i++ {
			createBatch(fmt.Sprintf("kill%02d", i), sz.batch)
			time.Sleep(time.Duration(200+rand.IntN(2800)) * time.Millisecond) // a random moment of the convergence
			op.kill()
			deleteSome(3)
			createBatch(fmt.Sprintf("down%02d", i), 2)
			op = start("single", false)
		}
		restarted := time.Now()
		after, s := converge(restarted)
		record(row{Scenario: "kill -9", Fault: fmt.Sprintf("SIGKILL ×%d during convergences; 3 sources deleted and 2 created while down", sz.kills),
			Converge: after}, s)
		op.stop()
		op = nil
	})

	Context("with two replicas and leader election", func() {
		var a, b *proc
		leader := func() (*proc, *proc) {
			var l, f *proc
			Eventually(func() bool {
				switch {
				case a.running() && a.leads():
					l, f = a, b
				case b.running() && b.leads():
					l, f = b, a
				default:
					return false
				}
				return true
			}, time.Minute, 100*time.Millisecond).Should(BeTrue(), "no leader")
			return l, f
		}
		takeover := func(standby *proc, from time.Time) time.Duration {
			Eventually(standby.leads, time.Minute, 50*time.Millisecond).Should(BeTrue(), "the standby did not take over")
			return time.Since(from)
		}
		BeforeAll(func() {
			a, b = start("replica-a", true), start("replica-b", true)
			leader()
			connected()
		})
		AfterAll(func() {
			for _, p := range []*proc{a, b} {
				if p != nil {
					p.stop()
				}
			}
		})

		It("replaces a killed leader", func() {
			l, standby := leader()
			createBatch("leader-kill", sz.batch)
			time.Sleep(time.Duration(200+rand.IntN(1300)) * time.Millisecond)
			killed := time.Now()
			l.kill()
			deleteSome(3)
			took := takeover(standby, killed)
			after, s := converge(killed)
			record(row{Scenario: "leader killed", Fault: "SIGKILL of the leader during a convergence (lease 4 s)", Converge: after,
				Takeover: fmt.Sprintf("%.1f s", took.Seconds())}, s)
			// The killed one comes back as the standby.
			if l == a {
				a = start("replica-a", true)
			} else {
				b = start("replica-b", true)
			}
		})

		It("replaces a paused leader, and the resumed one steps down without writing twice", func() {
			l, standby := leader()
			// A slow API keeps the leader's workers between a lookup and the create
			// it decides on: the moment a resumed leader would create what its
			// successor created meanwhile (a duplicate, without the Lease fence).
			proxy.Set(&faultproxy.Fault{Latency: 300 * time.Millisecond})
			before := len(api.LiveObjects("endpoints"))
			createBatch("leader-pause", sz.batch)
			Eventually(func() int { return len(api.LiveObjects("endpoints")) - before }, 30*time.Second, 20*time.Millisecond).
				Should(BeNumerically(">=", 4), "the convergence did not start")
			paused := time.Now()
			Expect(l.cmd.Process.Signal(syscall.SIGSTOP)).To(Succeed())
			deleteSome(3)
			took := takeover(standby, paused)
			time.Sleep(2 * time.Second)
			Expect(l.cmd.Process.Signal(syscall.SIGCONT)).To(Succeed())
			window(2 * time.Second) // the resumed leader's workers run on until it notices
			proxy.Set(nil)
			// Its renewal fails: it stops leading (the process exits, as a Deployment
			// would restart it) or at least never leads again while the other does.
			Eventually(func() bool { return !l.running() || !l.leads() }, 30*time.Second, 100*time.Millisecond).Should(BeTrue(),
				"the resumed leader still leads")
			after, s := converge(paused)
			Expect(standby.leads()).To(BeTrue())
			record(row{Scenario: "leader paused", Fault: "SIGSTOP of the leader mid-convergence (300 ms API latency) for the takeover + 2 s, then SIGCONT", Converge: after,
				Takeover: fmt.Sprintf("%.1f s", took.Seconds())}, s)
		})
	})
})
