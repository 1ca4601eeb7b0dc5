package fleet

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	v1 "github.com/polycrate/polycrate-operator/api/v1alpha1"
	"github.com/polycrate/polycrate-operator/internal/emulator"
	"github.com/polycrate/polycrate-operator/internal/polycrate"
	"github.com/polycrate/polycrate-operator/internal/testutil"
)

const (
	oldVersion = "0.1.0"
	newVersion = "0.2.0"
	opNS       = "polycrate"
)

// fleet is the run's shared state.
type fleet struct {
	url  string
	sys  *polycrate.Client
	bins map[string]string // version → operator binary
	dir  string

	mu      sync.Mutex
	started map[string]bool // clusters that began an update → whether it was forced
	events  []string
}

func (f *fleet) logf(format string, args ...any) {
	line := fmt.Sprintf(format, args...)
	f.mu.Lock()
	f.events = append(f.events, line)
	f.mu.Unlock()
	fmt.Fprintln(GinkgoWriter, line)
	AddReportEntry("fleet", line)
}

// begin records that a cluster began updating (the gate admitted it, or it was
// forced); it is in flight until the API holds its new version.
func (f *fleet) begin(name string, forced bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.started == nil {
		f.started = map[string]bool{}
	}
	f.started[name] = forced
}

// inFlight counts the clusters the gate admitted that have begun and whose new
// version the API does not hold yet.
func (f *fleet) inFlight(rows map[string]polycrate.RolloutCluster, target string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for name, forced := range f.started {
		if r := rows[name]; !forced && (r.InstalledVersion == nil || *r.InstalledVersion != target) {
			n++
		}
	}
	return n
}

// rows is the aggregate by cluster name.
func (f *fleet) rows(ctx context.Context) (map[string]polycrate.RolloutCluster, map[string]int, error) {
	agg, err := f.sys.GetOperatorRollout(ctx)
	if err != nil {
		return nil, nil, err
	}
	out := map[string]polycrate.RolloutCluster{}
	for _, r := range agg.Clusters {
		out[r.ClusterName] = r
	}
	return out, agg.Versions, nil
}

// due: the row wants this cluster on another version now.
func due(r polycrate.RolloutCluster, running string) (string, bool, bool) {
	if r.DesiredVersion == nil || *r.DesiredVersion == running {
		return "", false, false
	}
	switch r.RolloutStatus {
	case emulator.RolloutUpdating:
		return *r.DesiredVersion, false, true
	case emulator.RolloutForced:
		return *r.DesiredVersion, true, true
	}
	return "", false, false
}

// realCluster is an envtest control plane with the operator binary running
// against it; an update stops the binary and starts the new version's.
type realCluster struct {
	name, token string
	env         *envtest.Environment
	k8s         client.Client
	kubeconfig  string
	// mu guards the running binary: the supervisor and the spec both replace it.
	mu      sync.Mutex
	cmd     *exec.Cmd
	done    chan struct{}
	running string
}

// replace stops the running operator, if any, and starts version's.
func (r *realCluster) replace(f *fleet, version string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.stop()
	r.start(f, version)
}

// halt stops the running operator, if any.
func (r *realCluster) halt() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.stop()
}

// version is the version of the running operator.
func (r *realCluster) version() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.running
}

// start and stop run under mu (replace, halt).
func (r *realCluster) start(f *fleet, version string) {
	logFile, err := os.OpenFile(filepath.Join(f.dir, r.name+".log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	Expect(err).NotTo(HaveOccurred())
	cmd := exec.Command(f.bins[version], "run", "--kubeconfig", r.kubeconfig, "--namespace", opNS,
		"--metrics-bind-address", "0", "--health-probe-bind-address", "0", "--graceful-shutdown-timeout", "5s")
	cmd.Env = append(os.Environ(), "KUBECONFIG=")
	cmd.Stdout, cmd.Stderr = logFile, logFile
	Expect(cmd.Start()).To(Succeed())
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); _ = logFile.Close(); close(done) }()
	r.cmd, r.done, r.running = cmd, done, version
}

func (r *realCluster) stop() {
	if r.cmd == nil {
		return
	}
	_ = r.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-r.done:
	case <-time.After(30 * time.Second):
		_ = r.cmd.Process.Kill()
		<-r.done
	}
	r.cmd = nil
}

// supervise plays the cluster's deployment tooling: when the rollout wants the
// cluster on another version, the running operator is replaced by that
// version's binary.
func (r *realCluster) supervise(ctx context.Context, f *fleet) {
	defer GinkgoRecover()
	for ctx.Err() == nil {
		if rows, _, err := f.rows(ctx); err == nil {
			if want, forced, ok := due(rows[r.name], r.version()); ok {
				f.begin(r.name, forced)
				f.logf("%s: rollout status %s → restarting the operator as %s (was %s)", r.name, rows[r.name].RolloutStatus, want, r.version())
				r.replace(f, want)
				// In flight until the API holds the new version.
				for ctx.Err() == nil {
					rows, _, err := f.rows(ctx)
					if err == nil && rows[r.name].InstalledVersion != nil && *rows[r.name].InstalledVersion == want {
						break
					}
					pause(ctx, 200*time.Millisecond)
				}
				f.logf("%s: the operator reports %s", r.name, want)
			}
		}
		pause(ctx, 300*time.Millisecond)
	}
}

// simAgent is a simulated cluster: it reports health as an operator, registers
// a cluster and its polycrate-operator app, and "updates" (a second later) when
// its own rollout row says so — read with its own customer token.
type simAgent struct {
	name    string
	c       *polycrate.Client
	version string
	appID   string
	silent  atomic.Bool
}

func (a *simAgent) register(ctx context.Context) {
	_, err := a.c.ReportHealth(ctx, polycrate.HealthReport{Kind: "operator", Version: a.version, Status: "healthy"})
	Expect(err).NotTo(HaveOccurred())
	c, err := a.c.K8sClusters().Create(ctx, polycrate.K8sClusterRequest{Kind: "generic", Name: a.name})
	Expect(err).NotTo(HaveOccurred())
	app, err := a.c.K8sApps().Create(ctx, polycrate.K8sAppRequest{Name: "polycrate-operator", Kind: "polycrate", K8sCluster: &c.ID,
		InstalledVersion: ptr.To(a.version)})
	Expect(err).NotTo(HaveOccurred())
	a.appID = app.ID
}

func (a *simAgent) run(ctx context.Context, f *fleet) {
	defer GinkgoRecover()
	for ctx.Err() == nil {
		if !a.silent.Load() {
			_, _ = a.c.ReportHealth(ctx, polycrate.HealthReport{Kind: "operator", Version: a.version, Status: "healthy"})
		}
		if own, err := a.c.GetOperatorRollout(ctx); err == nil && len(own.Clusters) == 1 && !a.silent.Load() {
			if want, forced, ok := due(own.Clusters[0], a.version); ok {
				f.begin(a.name, forced)
				f.logf("%s: rollout status %s → updating %s → %s", a.name, own.Clusters[0].RolloutStatus, a.version, want)
				pause(ctx, time.Second)
				if _, err := a.c.K8sApps().Patch(ctx, a.appID, map[string]any{"installed_version": want}); err == nil {
					a.version = want
				}
			}
		}
		pause(ctx, 400*time.Millisecond)
	}
}

func pause(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

var _ = Describe("a fleet rollout", func() {
	It("rolls OPERATOR_BLOCK_VERSION out in canary batches, maintenance first, deferring CRITICAL, skipping paused, honouring force; real operators restart as the new version", func() {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		nReal, nSim, pct := *flagReal, *flagSimulated, *flagPercentage
		Expect(nSim).To(BeNumerically(">=", 4), "the gating rules need four simulated clusters")
		f := &fleet{dir: GinkgoT().TempDir(), bins: map[string]string{}}

		By("building the operator binary as " + oldVersion + " and " + newVersion)
		var builds sync.WaitGroup
		for _, v := range []string{oldVersion, newVersion} {
			bin := filepath.Join(f.dir, "polycrate-operator-"+v)
			f.bins[v] = bin
			builds.Go(func() {
				defer GinkgoRecover()
				Expect(testutil.BuildOperator(bin, v)).To(Succeed())
			})
		}

		By(fmt.Sprintf("an API emulator with %d real and %d simulated clusters' workspaces, and one without an agent token", nReal, nSim))
		seed, err := emulator.ParseSeed(emulator.DefaultSeedYAML)
		Expect(err).NotTo(HaveOccurred())
		org := emulator.SeedOrganization{Name: "fleet"}
		token := func(name string) string { return "fleet-token-" + name }
		var realNames, simNames []string
		for i := range nReal {
			realNames = append(realNames, fmt.Sprintf("real-%d", i))
		}
		for i := range nSim {
			simNames = append(simNames, fmt.Sprintf("sim-%02d", i))
		}
		for _, n := range append(append([]string{}, realNames...), simNames...) {
			org.Workspaces = append(org.Workspaces, emulator.SeedWorkspace{Name: n, Pop: "fra1", Tokens: []string{token(n)}})
		}
		org.Workspaces = append(org.Workspaces, emulator.SeedWorkspace{Name: "no-token", Pop: "fra1"})
		seed.Organizations = append(seed.Organizations, org)
		seed.SystemConfig["OPERATOR_BLOCK_VERSION"] = oldVersion
		api, err := emulator.New(emulator.Config{Seed: seed, AgentSilenceThreshold: 8 * time.Second})
		Expect(err).NotTo(HaveOccurred())
		go api.Run(ctx)
		ts := httptest.NewServer(api.Handler())
		defer ts.Close()
		f.url = ts.URL
		apiClient := func(tok string) *polycrate.Client {
			c, err := polycrate.New(polycrate.Options{BaseURL: ts.URL, Token: polycrate.StaticToken(tok)})
			Expect(err).NotTo(HaveOccurred())
			return c
		}
		f.sys = apiClient(emulator.DevSystemToken)
		ws := map[string]string{}
		wss, err := f.sys.Workspaces().List(ctx, nil)
		Expect(err).NotTo(HaveOccurred())
		for _, w := range wss {
			ws[w.Name] = w.ID
		}
		// A platform token names the workspace of what it creates.
		post(ts.URL, "/api/v1/kubernetes/clusters/", map[string]any{"kind": "generic", "name": "no-token", "workspace_id": ws["no-token"]})

		By("the real clusters: a control plane each, the " + oldVersion + " operator, which installs its CRDs")
		builds.Wait()
		reals := make([]*realCluster, nReal)
		var starts sync.WaitGroup
		for i, n := range realNames {
			r := &realCluster{name: n, token: token(n)}
			reals[i] = r
			starts.Go(func() {
				defer GinkgoRecover()
				var cfg = startEnv(r, f.dir)
				k8s, err := client.New(cfg, client.Options{Scheme: testutil.Scheme()})
				Expect(err).NotTo(HaveOccurred())
				r.k8s = k8s
				Expect(k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: opNS}})).To(Succeed())
				Expect(k8s.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: opNS, Name: "polycrate-api-creds"},
					StringData: map[string]string{"token": r.token}})).To(Succeed())
				r.replace(f, oldVersion)
				Eventually(func(g Gomega) {
					crd := &apiextensionsv1.CustomResourceDefinition{}
					g.Expect(k8s.Get(ctx, client.ObjectKey{Name: "operatorconfigs.polycrate.io"}, crd)).To(Succeed())
				}, 2*time.Minute, 200*time.Millisecond).Should(Succeed(), "the operator installs its CRDs")
				oc := &v1.OperatorConfig{ObjectMeta: metav1.ObjectMeta{Namespace: opNS, Name: v1.DefaultOperatorConfigName}}
				oc.Spec.APISync.APIURL = ts.URL
				oc.Spec.APISync.HealthReportIntervalSeconds = 2
				oc.Spec.LocalCluster.ClusterName = r.name
				oc.Spec.EndpointMonitoring.Enabled = ptr.To(false)
				oc.Spec.ExternalDNSWebhook.Enabled = ptr.To(false) // two operators on one machine: no fixed ports
				Eventually(func() error { return k8s.Create(ctx, oc) }, time.Minute, 200*time.Millisecond).Should(Succeed())
			})
		}
		starts.Wait()
		defer func() {
			for _, r := range reals {
				r.halt()
				if r.env != nil {
					_ = r.env.Stop()
				}
			}
		}()

		By("the simulated clusters report as " + oldVersion)
		sims := map[string]*simAgent{}
		for _, n := range simNames {
			a := &simAgent{name: n, c: apiClient(token(n)), version: oldVersion}
			a.register(ctx)
			sims[n] = a
		}
		// Everybody reported the old version: the fleet is up to date.
		Eventually(func(g Gomega) {
			rows, versions, err := f.rows(ctx)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(rows).To(HaveLen(nReal + nSim + 1))
			g.Expect(versions).To(Equal(map[string]int{oldVersion: nReal + nSim}))
			g.Expect(rows["no-token"].RolloutStatus).To(Equal(emulator.RolloutBlocked))
			g.Expect(strings.Join(rows["no-token"].Blockers, ";")).To(ContainSubstring("no agent token"))
		}, 2*time.Minute, 250*time.Millisecond).Should(Succeed())
		for _, a := range sims {
			go a.run(ctx, f)
		}
		for _, r := range reals {
			go r.supervise(ctx, f)
		}

		// The gating cast: one simulated cluster silent (CRITICAL), one paused, one
		// forced, and in a maintenance the cluster the gate would otherwise take
		// last (the greatest id of the rest).
		critical, paused, forced := simNames[0], simNames[1], simNames[2]
		maint := ""
		all, _, err := f.rows(ctx)
		Expect(err).NotTo(HaveOccurred())
		for name, r := range all {
			if name != critical && name != paused && name != forced && name != "no-token" && (maint == "" || r.ClusterID > all[maint].ClusterID) {
				maint = name
			}
		}
		By(fmt.Sprintf("%s falls silent, %s is paused, %s forced, %s is in a maintenance", critical, paused, forced, maint))
		sims[critical].silent.Store(true)
		Eventually(func() string { rows, _, _ := f.rows(ctx); return rows[critical].State }, 30*time.Second, 250*time.Millisecond).Should(Equal("CRITICAL"))
		clusterID := func(name string) string { rows, _, _ := f.rows(ctx); return rows[name].ClusterID }
		_, err = f.sys.PauseOperatorRollout(ctx, clusterID(paused))
		Expect(err).NotTo(HaveOccurred())
		_, err = f.sys.ForceOperatorUpdate(ctx, clusterID(forced))
		Expect(err).NotTo(HaveOccurred())
		now := time.Now().UTC()
		post(ts.URL, "/api/v1/maintenances/", map[string]any{"name": "kernel updates", "workspace_id": ws[maint],
			"start": now.Add(-time.Minute).Format(time.RFC3339), "end": now.Add(time.Hour).Format(time.RFC3339)})

		batch := int(math.Ceil(float64(nReal+nSim+1) * pct / 100))
		By(fmt.Sprintf("OPERATOR_BLOCK_VERSION %s, OPERATOR_ROLLOUT_PERCENTAGE %g: %d clusters at a time", newVersion, pct, batch))
		_, err = f.sys.PatchSystemConfig(ctx, map[string]any{"OPERATOR_BLOCK_VERSION": newVersion, "OPERATOR_ROLLOUT_PERCENTAGE": pct})
		Expect(err).NotTo(HaveOccurred())

		firstUpdating := map[string]int{} // cluster → sample number of its first "updating"
		maxInFlight := 0
		lastHistogram := ""
		sample := 0
		observe := func(g Gomega) map[string]polycrate.RolloutCluster {
			rows, versions, err := f.rows(ctx)
			g.Expect(err).NotTo(HaveOccurred())
			sample++
			updating := 0
			for name, r := range rows {
				if r.RolloutStatus != emulator.RolloutUpdating {
					continue
				}
				updating++
				if _, seen := firstUpdating[name]; !seen {
					firstUpdating[name] = sample
					// CRITICAL clusters are deferred: none enters the batch.
					Expect(r.State).NotTo(Equal("CRITICAL"), "%s entered the batch while CRITICAL", name)
				}
			}
			// The gate: never more than a batch at a time, in the API and in the fleet.
			Expect(updating).To(BeNumerically("<=", batch), "clusters updating at once")
			n := f.inFlight(rows, newVersion)
			Expect(n).To(BeNumerically("<=", batch), "updates in flight at once")
			maxInFlight = max(maxInFlight, n)
			if h := histogram(versions); h != lastHistogram {
				f.logf("versions: %s", h)
				lastHistogram = h
			}
			return rows
		}

		By("the batches roll; the silent cluster is deferred until it reports again")
		Eventually(func(g Gomega) {
			rows := observe(g)
			done := 0
			for _, r := range rows {
				if r.RolloutStatus == emulator.RolloutUpToDate {
					done++
				}
			}
			// Once half the fleet is through, the silent cluster comes back.
			if done >= (nReal+nSim)/2 && sims[critical].silent.Load() {
				f.logf("%s: reports again (state %s, %s)", critical, rows[critical].State, rows[critical].RolloutStatus)
				sims[critical].silent.Store(false)
			}
			for name, r := range rows {
				if name == paused || name == "no-token" {
					continue
				}
				g.Expect(r.RolloutStatus).To(Equal(emulator.RolloutUpToDate), name)
			}
			g.Expect(rows[paused].RolloutStatus).To(Equal(emulator.RolloutPaused))
			g.Expect(*rows[paused].InstalledVersion).To(Equal(oldVersion))
		}, 5*time.Minute, 200*time.Millisecond).Should(Succeed())

		By("forcing the paused cluster")
		_, err = f.sys.ForceOperatorUpdate(ctx, clusterID(paused))
		Expect(err).NotTo(HaveOccurred())
		Eventually(func(g Gomega) {
			rows := observe(g)
			g.Expect(rows[paused].RolloutStatus).To(Equal(emulator.RolloutUpToDate))
		}, time.Minute, 200*time.Millisecond).Should(Succeed())

		By("checking what every rule did")
		rows, versions, err := f.rows(ctx)
		Expect(err).NotTo(HaveOccurred())
		Expect(versions).To(Equal(map[string]int{newVersion: nReal + nSim}))
		// Maintenance first: no cluster the gate admitted went before it.
		for name, at := range firstUpdating {
			if name != maint {
				Expect(firstUpdating[maint]).To(BeNumerically("<=", at), "%s went before the cluster in maintenance", name)
			}
		}
		// The forced cluster never waited for the gate; the critical one was
		// deferred, then updated through the gate.
		_, forcedGated := firstUpdating[forced]
		Expect(forcedGated).To(BeFalse(), "the forced cluster went through the gate")
		Expect(firstUpdating).To(HaveKey(critical))
		Expect(maxInFlight).To(BeNumerically(">=", 1))
		// The real clusters run the new binary, which says so in the OperatorConfig.
		for _, r := range reals {
			Expect(r.version()).To(Equal(newVersion))
			Eventually(func(g Gomega) {
				oc := &v1.OperatorConfig{}
				g.Expect(r.k8s.Get(ctx, client.ObjectKey{Namespace: opNS, Name: v1.DefaultOperatorConfigName}, oc)).To(Succeed())
				g.Expect(oc.Status.OperatorVersion).NotTo(BeNil())
				g.Expect(oc.Status.OperatorVersion.Installed).To(Equal(newVersion))
				g.Expect(oc.Status.OperatorVersion.Desired).To(Equal(newVersion))
				c := meta.FindStatusCondition(oc.Status.Conditions, v1.ConditionCRDsInstalled)
				g.Expect(c).NotTo(BeNil())
				g.Expect(c.Status).To(Equal(metav1.ConditionTrue))
				g.Expect(c.Message).To(ContainSubstring("applied by operator " + newVersion))
			}, time.Minute, 250*time.Millisecond).Should(Succeed())
			Expect(rows[r.name].InstalledVersion).To(Equal(ptr.To(newVersion)))
		}
		// Each new operator installed its CRDs: they carry its version.
		for _, r := range reals {
			crd := &apiextensionsv1.CustomResourceDefinition{}
			Expect(r.k8s.Get(ctx, client.ObjectKey{Name: "operatorconfigs.polycrate.io"}, crd)).To(Succeed())
			Expect(crd.Annotations).To(HaveKeyWithValue("polycrate.io/operator-version", newVersion))
		}

		By("rolling one real cluster back (paused): the older operator leaves the newer CRDs as they are")
		back := reals[0]
		_, err = f.sys.PauseOperatorRollout(ctx, rows[back.name].ClusterID)
		Expect(err).NotTo(HaveOccurred())
		back.replace(f, oldVersion)
		Eventually(func(g Gomega) {
			oc := &v1.OperatorConfig{}
			g.Expect(back.k8s.Get(ctx, client.ObjectKey{Namespace: opNS, Name: v1.DefaultOperatorConfigName}, oc)).To(Succeed())
			g.Expect(oc.Status.OperatorVersion).NotTo(BeNil())
			g.Expect(oc.Status.OperatorVersion.Installed).To(Equal(oldVersion))
			// The OperatorConfig says the CRDs are a newer operator's.
			c := meta.FindStatusCondition(oc.Status.Conditions, v1.ConditionCRDsInstalled)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Reason).To(Equal(v1.ReasonCRDsLeftAsInstalled))
			g.Expect(c.Message).To(ContainSubstring("newer than this operator"))
		}, time.Minute, 250*time.Millisecond).Should(Succeed())
		crd := &apiextensionsv1.CustomResourceDefinition{}
		Expect(back.k8s.Get(ctx, client.ObjectKey{Name: "operatorconfigs.polycrate.io"}, crd)).To(Succeed())
		Expect(crd.Annotations).To(HaveKeyWithValue("polycrate.io/operator-version", newVersion), "the older operator downgraded the CRDs")
		logText, err := os.ReadFile(filepath.Join(f.dir, back.name+".log"))
		Expect(err).NotTo(HaveOccurred())
		Expect(string(logText)).To(ContainSubstring("CRD left as installed"))
		Eventually(func() string {
			rows, _, _ := f.rows(ctx)
			return rows[back.name].RolloutStatus
		}, 30*time.Second, 250*time.Millisecond).Should(Equal(emulator.RolloutPaused))
		f.logf("%s: rolled back to %s and paused; its CRDs stay at %s", back.name, oldVersion, newVersion)

		f.logf("converged: %s; at most %d updates in flight (batch %d); order through the gate: %s", histogram(versions), maxInFlight, batch, order(firstUpdating))
	})
})

// startEnv starts a control plane without CRDs (the operator installs its own)
// and writes its kubeconfig.
func startEnv(r *realCluster, dir string) *rest.Config {
	env, cfg, err := testutil.Start(testutil.Options{})
	Expect(err).NotTo(HaveOccurred())
	r.env = env
	r.kubeconfig = filepath.Join(dir, r.name+".kubeconfig")
	Expect(os.WriteFile(r.kubeconfig, env.KubeConfig, 0o600)).To(Succeed())
	return cfg
}

// post sends a platform token's write the operator's client has no call for.
func post(base, path string, body map[string]any) {
	GinkgoHelper()
	b, err := json.Marshal(body)
	Expect(err).NotTo(HaveOccurred())
	req, err := http.NewRequest(http.MethodPost, base+path, bytes.NewReader(b))
	Expect(err).NotTo(HaveOccurred())
	req.Header.Set("Authorization", "Bearer "+emulator.DevSystemToken)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	Expect(err).NotTo(HaveOccurred())
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	Expect(resp.StatusCode).To(Equal(http.StatusCreated), "%s: %s", path, out)
}

// histogram is the seed's "30 × 0.34.0, 12 × 0.35.0".
func histogram(versions map[string]int) string {
	keys := make([]string, 0, len(versions))
	for v := range versions {
		keys = append(keys, v)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, v := range keys {
		parts[i] = fmt.Sprintf("%d × %s", versions[v], v)
	}
	return strings.Join(parts, ", ")
}

func order(first map[string]int) string {
	names := make([]string, 0, len(first))
	for n := range first {
		names = append(names, n)
	}
	sort.Slice(names, func(i, j int) bool {
		if first[names[i]] != first[names[j]] {
			return first[names[i]] < first[names[j]]
		}
		return names[i] < names[j]
	})
	return strings.Join(names, " ")
}
