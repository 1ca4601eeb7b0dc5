package chaos

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"

	"github.com/polycrate/polycrate-operator/internal/testutil/kubeproxy"
)

// The faults of the cluster's own API server, played by a proxy in front of
// envtest's kube-apiserver (internal/testutil/kubeproxy): restarts during a
// convergence (connections cut and refused, a warming server's 503s, then 410
// Gone for every watch that resumes from before the restart, as from a fresh
// watch cache), API priority and fairness 429s on the operator's writes, and a
// freeze that outlasts the leader's lease. The operator runs against the proxy;
// the test's own client goes to the API server directly.
var _ = Describe("the operator under Kubernetes faults", Ordered, func() {
	var (
		kp       *kubeproxy.Proxy
		kubecfg  string
		op       *proc
		yardstck time.Duration
	)

	BeforeAll(func() {
		clearWork()
		var err error
		kp, err = kubeproxy.New(restCfg)
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(kp.Close)
		b, err := kp.Kubeconfig()
		Expect(err).NotTo(HaveOccurred())
		kubecfg = filepath.Join(dir, "kubeconfig-proxied")
		Expect(os.WriteFile(kubecfg, b, 0o600)).To(Succeed())
	})
	AfterAll(func() {
		if op != nil {
			op.stop()
		}
	})

	// currentRV is the API server's resource version now (what a restarted
	// server's watch cache starts from).
	currentRV := func() int64 {
		l := &corev1.NamespaceList{}
		Expect(k8s.List(ctx, l)).To(Succeed())
		rv, err := strconv.ParseInt(l.ResourceVersion, 10, 64)
		Expect(err).NotTo(HaveOccurred())
		return rv
	}

	It("converges a fresh set of changes through the proxy (the yardstick of these scenarios)", func() {
		op = startWith("kube", false, kubecfg)
		connected()
		t0 := time.Now()
		createBatch("kfresh", sz.big)
		var s scanResult
		yardstck, s = converge(t0)
		record(row{Scenario: "fresh convergence (through the Kubernetes proxy)", Fault: "none", Converge: yardstck}, s)
	})

	It("sees again within 15 s of the last of five kube-apiserver restarts during a convergence, and converges within 1.5× a fresh one", func() {
		started := make(chan struct{})
		created := make(chan struct{})
		go func() {
			defer GinkgoRecover()
			defer close(created)
			close(started)
			createBatch("krestart", sz.big)
		}()
		<-started
		req0, refused0 := kp.Counts()
		for i := range sz.restarts {
			kp.Restart(sz.restartDown, sz.restartWarm, currentRV())
			if i < sz.restarts-1 {
				time.Sleep(time.Duration(500+rand.IntN(1500)) * time.Millisecond)
			}
		}
		back := time.Now()
		<-created
		// A change after the last restart: discovery must see it within 15 s.
		Expect(k8s.Create(ctx, ingress("krestart-after", sz.hosts))).To(Succeed())
		host := "h0.krestart-after" + domain
		Eventually(func() bool {
			for _, o := range api.LiveObjects("endpoints") {
				if o["remote_address"] == host {
					return true
				}
			}
			return false
		}, 15*time.Second, 100*time.Millisecond).Should(BeTrue(), "discovery blind 15 s after the API server answered again (logs in %s)", dir)
		seen := time.Since(back)
		after, s := converge(back)
		req, refused := kp.Counts()
		record(row{Scenario: "kube-apiserver restarted ×" + strconv.Itoa(sz.restarts),
			Fault: fmt.Sprintf("each: connections cut, refused %s, 503 while warming %s, then 410 for watches from before it; %d requests, %d refused by the proxy; a new Ingress seen %.1f s after the last",
				sz.restartDown, sz.restartWarm, req-req0, refused-refused0, seen.Seconds()),
			Converge: after}, s)
		Expect(after).To(BeNumerically("<=", max(yardstck*3/2, yardstck+5*time.Second)),
			"convergence after the restarts took %s, a fresh one %s; how it went: %s (logs in %s)", after, yardstck, strings.Join(s.trace, "; "), dir)
	})

	It("rides out API priority and fairness 429s on a third of its writes", func() {
		req0, _ := kp.Counts()
		kp.Throttle(0.33)
		t0 := time.Now()
		createBatch("kthrottle", sz.batch)
		deleteSome(3)
		window(sz.window)
		kp.Throttle(0)
		req, refused := kp.Counts()
		rpm := perMinute(req-req0, time.Since(t0))
		after, s := converge(time.Now())
		record(row{Scenario: "APF 429 on the operator's writes", Fault: fmt.Sprintf("429 with Retry-After: 1 on 33 %% of its Kubernetes writes (%d refused)", refused),
			RPM: fmt.Sprintf("%.0f (Kubernetes)", rpm), Converge: after}, s)
	})

	It("comes back clean after the API server froze longer than its lease", func() {
		op.stop()
		op = startWith("kube-ha", true, kubecfg)
		Eventually(op.leads, time.Minute, 100*time.Millisecond).Should(BeTrue())
		createBatch("kfreeze", sz.batch)
		frozen := make(chan struct{})
		go func() { defer close(frozen); kp.Freeze(sz.freeze) }()
		deleteSome(3)
		// Like a kubelet: an operator that exits (a lost lease) is started again.
		restarts := 0
		for done := false; !done; {
			select {
			case <-frozen:
				done = true
			case <-op.done:
				restarts++
				op = startWith("kube-ha", true, kubecfg)
			case <-time.After(100 * time.Millisecond):
			}
		}
		thawed := time.Now()
		Eventually(func() bool {
			if !op.running() {
				restarts++
				op = startWith("kube-ha", true, kubecfg)
			}
			return op.leads()
		}, time.Minute, 200*time.Millisecond).Should(BeTrue())
		after, s := converge(thawed)
		record(row{Scenario: "kube-apiserver frozen", Fault: fmt.Sprintf("no answer for %s (lease 4 s); the operator restarted %d× like a kubelet would", sz.freeze, restarts),
			Converge: after}, s)
	})
})
