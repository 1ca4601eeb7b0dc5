package externaldns_test

import (
	"context"
	"encoding/json"
	"k8s.io/apimachinery/pkg/util/wait"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/polycrate/polycrate-operator/api/v1alpha1"
	"github.com/polycrate/polycrate-operator/internal/emulator"
	"github.com/polycrate/polycrate-operator/internal/manager"
	"github.com/polycrate/polycrate-operator/internal/operator"
	"github.com/polycrate/polycrate-operator/internal/testutil"
	"github.com/polycrate/polycrate-operator/internal/webhooks/externaldns"
)

// TestAFollowerServes: a replica that is not the leader (another replica holds
// the Lease) serves the provider behind the Service too, with its own API
// connection from the OperatorConfig and the token Secret — and writes nothing.
func TestAFollowerServes(t *testing.T) {
	env, cfg, err := testutil.Start(testutil.Options{OwnCRDs: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	k8s, err := client.New(cfg, client.Options{Scheme: testutil.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	api, err := emulator.New(emulator.Config{})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(api.Handler())
	t.Cleanup(ts.Close)
	port := freePort(t)
	for _, o := range []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "polycrate"}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "polycrate", Name: "polycrate-api-creds"}, StringData: map[string]string{"token": emulator.DevAgentToken}},
		&coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: "polycrate", Name: "follower-test"}, Spec: coordinationv1.LeaseSpec{
			HolderIdentity: ptr.To("the-leader"), LeaseDurationSeconds: ptr.To[int32](3600), RenewTime: &metav1.MicroTime{Time: time.Now()},
			AcquireTime: &metav1.MicroTime{Time: time.Now()}}},
	} {
		if err := k8s.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	oc := &v1.OperatorConfig{ObjectMeta: metav1.ObjectMeta{Namespace: "polycrate", Name: "default"}}
	oc.Spec.APISync.APIURL = ts.URL
	oc.Spec.EndpointMonitoring.Enabled = ptr.To(false)
	oc.Spec.ExternalDNSWebhook = v1.ExternalDNSWebhookConfig{Enabled: ptr.To(true), Port: int32(port)} //nolint:gosec // a port
	if err := k8s.Create(ctx, oc); err != nil {
		t.Fatal(err)
	}
	mgr, err := manager.New(cfg, manager.Options{MetricsBindAddress: "0", HealthProbeBindAddress: "0", OperatorNamespace: "polycrate",
		LeaderElect: true, LeaderElectionID: "follower-test", Logger: testr.New(t), SkipNameValidation: true})
	if err != nil {
		t.Fatal(err)
	}
	op, err := operator.Setup(mgr, operator.Options{Namespace: "polycrate", Version: "0.0.1-test"})
	if err != nil {
		t.Fatal(err)
	}
	mctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { _ = mgr.Start(mctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })

	var filter externaldns.DomainFilter
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		req, _ := http.NewRequestWithContext(ctx, "GET", "http://127.0.0.1:"+strconv.Itoa(port)+"/", nil)
		req.Header.Set("Accept", externaldns.MediaType)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return false, nil
		}
		defer func() { _ = resp.Body.Close() }()
		return resp.StatusCode == http.StatusOK && json.NewDecoder(resp.Body).Decode(&filter) == nil, nil
	}); err != nil {
		t.Fatal("the follower does not serve the provider")
	}
	if len(filter.Include) != 2 {
		t.Fatalf("the follower's provider sees zones %v", filter.Include)
	}
	// Still a follower: no health report, no status written.
	if op.Health.Last() != nil {
		t.Fatal("the follower reported health: it ran as the leader")
	}
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(oc), oc); err != nil {
		t.Fatal(err)
	}
	if oc.Status.ObservedGeneration != 0 || len(oc.Status.Conditions) != 0 {
		t.Fatalf("the follower wrote the OperatorConfig's status: %+v", oc.Status)
	}
}
