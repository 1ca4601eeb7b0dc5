package polycrate_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	promtest "github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/polycrate/polycrate-operator/internal/emulator"
	"github.com/polycrate/polycrate-operator/internal/polycrate"
)

const otherToken = "other-agent-token"

type env struct {
	srv     *emulator.Server
	url     string
	headers *sync.Map // last request headers by path
}

// newEnv starts the emulator in-process with a second organization for
// cross-workspace tests.
func newEnv(t *testing.T, cfg emulator.Config) *env {
	t.Helper()
	seed, err := emulator.ParseSeed(emulator.DefaultSeedYAML)
	if err != nil {
		t.Fatal(err)
	}
	seed.Pops = append(seed.Pops, emulator.SeedPop{Name: "nbg1"})
	seed.Organizations = append(seed.Organizations, emulator.SeedOrganization{Name: "globex",
		Workspaces: []emulator.SeedWorkspace{{Name: "globex-prod", Pop: "nbg1", Tokens: []string{otherToken}}}})
	cfg.Seed = seed
	srv, err := emulator.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	e := &env{srv: srv, headers: &sync.Map{}}
	h := srv.Handler()
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		e.headers.Store(r.URL.Path, r.Header.Clone())
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(func() { ts.Close(); _ = srv.Close() })
	e.url = ts.URL
	return e
}

func (e *env) client(t *testing.T, token string, mod ...func(*polycrate.Options)) *polycrate.Client {
	t.Helper()
	o := polycrate.Options{BaseURL: e.url, Token: polycrate.StaticToken(token), UserAgent: "polycrate-operator/test"}
	for _, m := range mod {
		m(&o)
	}
	c, err := polycrate.New(o)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// must fails the test (by panicking, which the testing package reports with the
// error and stack) on an unexpected error.
func must[T any](v T, err error) T {
	if err != nil {
		panic(fmt.Sprintf("unexpected error: %v", err))
	}
	return v
}

func TestNewValidatesOptions(t *testing.T) {
	for _, u := range []string{"", "api.polycrate.io", "ftp://x", "http://"} {
		if _, err := polycrate.New(polycrate.Options{BaseURL: u, Token: polycrate.StaticToken("t")}); err == nil {
			t.Errorf("base URL %q accepted", u)
		}
	}
	if _, err := polycrate.New(polycrate.Options{BaseURL: "https://api.polycrate.io"}); err == nil {
		t.Error("no token source accepted")
	}
}

func TestAgentFlow(t *testing.T) {
	e := newEnv(t, emulator.Config{})
	ctx := context.Background()
	c := e.client(t, emulator.DevAgentToken)

	h := must(c.ReportHealth(ctx, polycrate.HealthReport{ReportedAgentID: "op-1", Kind: "operator", Version: "0.1.0", Status: "healthy"}))
	if h.WorkspaceName != "production" || *h.OrganizationName != "acme-corp" || h.PopName != "fra1" || h.AgentID == "" {
		t.Fatalf("health response %+v", h)
	}
	if hdr, _ := e.headers.Load("/api/v1/agent/health/"); hdr.(http.Header).Get("Authorization") != "Bearer "+emulator.DevAgentToken ||
		hdr.(http.Header).Get("User-Agent") != "polycrate-operator/test" {
		t.Fatalf("headers %v", hdr)
	}
	ep := must(c.Endpoints().Create(ctx, polycrate.EndpointRequest{Name: "prod-app-1", RemoteAddress: "app.example.com",
		Kind: "http", RemotePort: polycrate.Ptr(443), Spec: &polycrate.EndpointSpec{HTTP: &polycrate.HTTPSpec{Path: "/health", TLS: true}}}))
	assigned := must(c.AssignedEndpoints(ctx, h.AgentID))
	if len(assigned) != 1 || assigned[0].ID != ep.ID || assigned[0].Spec.HTTP.Path != "/health" {
		t.Fatalf("assigned %+v", assigned)
	}
	// The reported id works as X-Agent-ID too; an unknown one is a 404.
	if _, err := c.AssignedEndpoints(ctx, "op-1"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.AssignedEndpoints(ctx, "nobody"); !polycrate.IsNotFound(err) {
		t.Fatalf("unknown agent: %v", err)
	}
	_, err := c.ReportHealth(ctx, polycrate.HealthReport{ReportedAgentID: "op-1", Kind: "operator",
		CheckResults: []polycrate.CheckResult{{EndpointID: ep.ID, Success: false, StatusCode: polycrate.Ptr(503), ErrorName: "bad status"}}})
	if err != nil {
		t.Fatal(err)
	}
	as := must(c.Assignments(ctx, h.AgentID))
	if len(as) != 1 || as[0].ChecksFailed != 1 || *as[0].LastCheckStatusCode != 503 {
		t.Fatalf("assignments %+v", as)
	}
	rep := must(c.ReportErrors(ctx, polycrate.ErrorReport{AgentID: "op-1", Timestamp: time.Now(), TotalErrors: 1,
		ErrorCounts: map[string]int{"sync": 1}, CriticalErrors: []string{}, RecentErrors: []map[string]any{}, SystemInfo: map[string]any{}}))
	if rep.AgentID != h.AgentID || rep.ErrorID == "" {
		t.Fatalf("error report %+v", rep)
	}
	agent := must(c.Agents().Get(ctx, h.AgentID))
	if agent.Kind != "operator" || *agent.Version != "0.1.0" || agent.SourcePop.Name != "fra1" {
		t.Fatalf("agent %+v", agent)
	}
}

func TestSilentAgentTurnsCriticalWithDowntime(t *testing.T) {
	var mu sync.Mutex
	now := time.Now()
	e := newEnv(t, emulator.Config{AgentSilenceThreshold: time.Minute, Now: func() time.Time { mu.Lock(); defer mu.Unlock(); return now }})
	ctx := context.Background()
	c := e.client(t, emulator.DevAgentToken)
	h := must(c.ReportHealth(ctx, polycrate.HealthReport{Kind: "operator", ReportedAgentID: "op"}))
	mu.Lock()
	now = now.Add(2 * time.Minute)
	mu.Unlock()
	e.srv.Tick()
	if a := must(c.Agents().Get(ctx, h.AgentID)); a.State != "CRITICAL" {
		t.Fatalf("agent %s", a.State)
	}
	dts := must(c.Downtimes().List(ctx, nil))
	if len(dts) != 1 || !dts[0].IsActive {
		t.Fatalf("downtimes %+v", dts)
	}
	must(c.ReportHealth(ctx, polycrate.HealthReport{Kind: "operator", ReportedAgentID: "op"}))
	if a := must(c.Agents().Get(ctx, h.AgentID)); a.State != "OK" {
		t.Fatalf("recovered agent %s", a.State)
	}
	if d := must(c.Downtimes().Get(ctx, dts[0].ID)); d.IsActive || d.EndedAt == nil {
		t.Fatalf("downtime %+v", d)
	}
}

// TestResourceRoundTrips: create (201), get, list, PUT, PATCH, delete for every
// resource the operator writes.
func TestResourceRoundTrips(t *testing.T) {
	e := newEnv(t, emulator.Config{LBAddressDelay: -1})
	ctx := context.Background()
	c := e.client(t, emulator.DevAgentToken)
	cluster := must(c.K8sClusters().Create(ctx, polycrate.K8sClusterRequest{Kind: "generic", Name: "my-workspace", KubernetesVersion: polycrate.Ptr("v1.37.2")}))
	cl := cluster.ID

	t.Run("endpoints", func(t *testing.T) {
		r := c.Endpoints()
		req := polycrate.EndpointRequest{Name: "prod-web-1", RemoteAddress: "web.example.com", Kind: "http", RemotePort: polycrate.Ptr(443),
			K8sCluster: &cl, Spec: &polycrate.EndpointSpec{HTTP: &polycrate.HTTPSpec{Path: "/", TLS: true, Timeout: 5, Interval: 60, ExpectedStatusCode: 200, AcceptedStatusCodes: []int{200, 204}}},
			Common: polycrate.Common{DisplayName: polycrate.Ptr("web.example.com"), Labels: map[string]string{"polycrate_discovered": "true"}}, CreatedByComponent: "operator"}
		ep := must(r.Create(ctx, req))
		if ep.Spec.HTTP.AcceptedStatusCodes[1] != 204 || ep.K8sCluster.ID != cl {
			t.Fatalf("created %+v", ep)
		}
		req.Spec.HTTP.Path = "/healthz"
		if u := must(r.Update(ctx, ep.ID, req)); u.Spec.HTTP.Path != "/healthz" {
			t.Fatalf("PUT: %+v", u.Spec.HTTP)
		}
		if p := must(r.Patch(ctx, ep.ID, map[string]any{"remote_port": 8443})); *p.RemotePort != 8443 {
			t.Fatal("PATCH lost")
		}
		rows := must(r.List(ctx, polycrate.Query("name_exact", "prod-web-1")))
		if len(rows) != 1 || rows[0].ID != ep.ID || rows[0].Name != "web.example.com" {
			t.Fatalf("find: %+v (list rows show the display name)", rows)
		}
		if err := r.Delete(ctx, ep.ID); err != nil { // 202
			t.Fatal(err)
		}
		if _, err := r.Get(ctx, ep.ID); !polycrate.IsNotFound(err) {
			t.Fatalf("soft-deleted endpoint: %v", err)
		}
		if rows := must(r.List(ctx, polycrate.Query("name_exact", "prod-web-1"))); len(rows) != 0 {
			t.Fatal("deleted endpoint still listed")
		}
		if err := r.Delete(ctx, ep.ID); err != nil { // idempotent: 202 again
			t.Fatal(err)
		}
	})
	t.Run("kubernetes apps", func(t *testing.T) {
		app := must(c.K8sApps().Create(ctx, polycrate.K8sAppRequest{Name: "nginx-ingress", Kind: "helm", K8sCluster: &cl,
			Namespace: polycrate.Ptr("production"), InstalledVersion: polycrate.Ptr("1.2.0"), Installed: true, PodsTotal: 3, PodsReady: 3}))
		if row := must(c.FindK8sApp(ctx, "nginx-ingress", cl)); row == nil || row.ID != app.ID || row.K8sCluster.ID != cl {
			t.Fatalf("find app %+v", row)
		}
		if _, err := c.K8sApps().Patch(ctx, app.ID, map[string]any{"pods_ready": 2}); err != nil {
			t.Fatal(err)
		}
		if err := c.K8sApps().Delete(ctx, app.ID); !polycrate.IsForbidden(err) || !polycrate.IsPermanent(err) {
			t.Fatalf("agent deleting an app: %v", err)
		}
	})
	t.Run("volumes", func(t *testing.T) {
		v := must(c.K8sVolumes().Create(ctx, polycrate.K8sVolumeRequest{Name: "pvc-1", K8sCluster: cl, ProviderObjectID: polycrate.Ptr("uid-1"),
			CapacityBytes: polycrate.Ptr(int64(10 << 30)), CapacityString: polycrate.Ptr("10Gi"), Phase: "Bound", AccessModes: []string{"ReadWriteOnce"}, ReclaimPolicy: "Delete"}))
		rows := must(c.K8sVolumes().List(ctx, polycrate.Query("k8s_cluster", cl)))
		if len(rows) != 1 || rows[0].K8sCluster.ID != cl || rows[0].Phase != "Bound" {
			t.Fatalf("volume rows %+v", rows)
		}
		if err := c.K8sVolumes().Delete(ctx, v.ID); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("hosts", func(t *testing.T) {
		h := must(c.Hosts().Create(ctx, polycrate.HostRequest{Name: "worker-1", Hostname: "worker-1", DefaultIPv4: polycrate.Ptr("203.0.113.10"),
			ResourceCPUCores: polycrate.Ptr(int64(8)), ResourceMemory: polycrate.Ptr(int64(32768)), K8sCluster: &cl,
			Common: polycrate.Common{ProviderReference: polycrate.Ptr("hcloud://123")}}))
		if *h.ProviderReference != "hcloud://123" || *h.ResourceMemory != 32768 {
			t.Fatalf("host %+v", h)
		}
		if _, err := c.Hosts().Create(ctx, polycrate.HostRequest{Name: "Worker_2", Hostname: "w"}); !polycrate.IsValidation(err) {
			t.Fatalf("bad slug: %v", err)
		} else if items := polycrate.ValidationErrors(err); len(items) != 1 || *items[0].Attr != "name" {
			t.Fatalf("validation items %+v", items)
		}
	})
	t.Run("backups and schedules", func(t *testing.T) {
		ns := "velero"
		s := must(c.BackupSchedules().Create(ctx, polycrate.BackupScheduleRequest{Name: "daily", K8sCluster: cl, Provider: "velero", Kind: "cluster",
			SourceNamespace: &ns, ScheduleCron: polycrate.Ptr("0 2 * * *"), Metadata: map[string]any{"last_backup_name": "daily-1"}}))
		b := must(c.Backups().Create(ctx, polycrate.BackupRequest{Name: "daily-1", K8sCluster: cl, Provider: "velero", Kind: "cluster",
			SourceNamespace: &ns, Status: "completed", Schedule: &s.ID}))
		key := func(provider string) url.Values {
			return polycrate.Query("name_exact", "daily-1", "provider", provider, "source_namespace", "velero", "k8s_cluster", cl)
		}
		if rows := must(c.Backups().List(ctx, key("velero"))); len(rows) != 1 || rows[0].ID != b.ID {
			t.Fatalf("find backup %+v", rows)
		}
		if rows := must(c.Backups().List(ctx, key("cloudnativepg"))); len(rows) != 0 {
			t.Fatal("provider is part of the natural key")
		}
		if _, err := c.Backups().Create(ctx, polycrate.BackupRequest{Name: "x", K8sCluster: cl, Status: "done"}); !polycrate.IsValidation(err) {
			t.Fatalf("bad enum: %v", err)
		}
	})
	t.Run("certificates", func(t *testing.T) {
		na := time.Now().Add(10 * 24 * time.Hour)
		cert := must(c.Certificates().Create(ctx, polycrate.CertificateRequest{Name: "api-example-com-tls", SecretName: "api-example-com-tls",
			Namespace: "production", K8sCluster: cl, DNSNames: []string{"api.example.com"}, IssuerKind: polycrate.Ptr("clusterissuer"),
			CertificateStatus: "expiring_soon", IsReady: true, NotAfter: &na}))
		if !cert.IsExpiringSoon || cert.IsExpired || *cert.DaysUntilExpiry < 9 {
			t.Fatalf("computed expiry %+v", cert)
		}
		// The API filters certificates by name only; the rows carry namespace and
		// cluster, which the operator's lookup matches.
		rows := must(c.Certificates().List(ctx, polycrate.Query("name_exact", "api-example-com-tls")))
		if len(rows) != 1 || rows[0].ID != cert.ID || rows[0].Namespace != "production" || rows[0].K8sCluster == nil || rows[0].K8sCluster.ID != cl {
			t.Fatalf("find certificate %+v", rows)
		}
	})
	t.Run("s3 buckets", func(t *testing.T) {
		regions := must(c.Regions(ctx))
		var nbg string
		for _, r := range regions {
			if r.Name == "nbg1" {
				nbg = r.ID
			}
		}
		b := must(c.CreateBucket(ctx, polycrate.BucketCreateRequest{Name: "app-data", Region: &nbg}))
		detail := must(c.Buckets().Get(ctx, b.ID))
		if *detail.S3Region != "nbg1" || *detail.S3Endpoint != "https://s3.nbg1.example.com" {
			t.Fatalf("bucket %+v", detail)
		}
		creds := must(c.BucketCredentials(ctx, b.ID))
		if len(creds) != 1 || *creds[0].AccessKey == "" || *creds[0].SecretKey == "" {
			t.Fatalf("credentials %+v", creds)
		}
		if _, err := c.CreateBucket(ctx, polycrate.BucketCreateRequest{Name: "app-data", Region: &nbg}); !polycrate.IsConflict(err) {
			t.Fatalf("second bucket: %v", err)
		}
		if row := must(c.FindBucket(ctx, "app-data")); row == nil || row.ID != b.ID {
			t.Fatal("adopt by name")
		}
		if _, err := c.Buckets().Update(ctx, b.ID, polycrate.BucketUpdateRequest{Labels: map[string]string{"a": "b"}}); err != nil {
			t.Fatal(err)
		}
		if err := c.Buckets().Delete(ctx, b.ID); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("dns", func(t *testing.T) {
		z := must(c.ResolveZone(ctx, "_acme-challenge.app.example.com."))
		rec := must(c.DNSRecords().Create(ctx, polycrate.DNSRecordRequest{DNSZoneID: z.ID, Name: "_acme-challenge.app", Type: "TXT", Content: "abc", TTL: 60}))
		if rec.DNSZone.Name != "example.com" {
			t.Fatalf("record %+v", rec)
		}
		if err := c.DNSRecords().Delete(ctx, rec.ID); err != nil { // 204
			t.Fatal(err)
		}
		if _, err := c.DNSRecords().Get(ctx, rec.ID); !polycrate.IsNotFound(err) {
			t.Fatalf("hard-deleted record: %v", err)
		}
		if _, err := c.ResolveZone(ctx, "example.org"); !polycrate.IsNotFound(err) {
			t.Fatalf("no zone: %v", err)
		}
	})
	t.Run("load balancers", func(t *testing.T) {
		h := must(c.ReportHealth(ctx, polycrate.HealthReport{}))
		lb := must(c.CreateLoadBalancer(ctx, polycrate.LoadBalancerCreateRequest{Workspace: h.WorkspaceID, Organization: *h.OrganizationID,
			DisplayName: polycrate.Ptr("default/web"), Ports: []map[string]any{{"port": 80, "target_port": 30080}}, Labels: map[string]string{"polycrate_service_uid": "u1"}}))
		got := must(c.LoadBalancers().Get(ctx, lb.ID))
		if !strings.HasPrefix(got.Address(), "198.51.100.") || got.IPAddress == nil || got.IPAddress.IPAddress == nil ||
			len(got.RegionDeployments) != 1 || got.RegionDeployments[0].DeploymentStatus != "deployed" || got.Ports[0].TargetPort != 30080 {
			t.Fatalf("lb %+v", got)
		}
		if _, err := c.LoadBalancers().Update(ctx, lb.ID, polycrate.LoadBalancerUpdateRequest{Ports: []map[string]any{{"port": 443}}}); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("tenancy and config", func(t *testing.T) {
		ws := must(c.FindWorkspace(ctx, "production", "acme-corp"))
		if ws == nil {
			t.Fatal("workspace by name and organization")
		}
		if b := must(c.FindBlock(ctx, "nginx-ingress", ws.ID)); b == nil || *b.Version != "1.2.0" {
			t.Fatalf("block %+v", b)
		}
		// The workspaces filter: a block of another workspace id is not found.
		if b := must(c.FindBlock(ctx, "nginx-ingress", "00000000-0000-4000-8000-000000000000")); b != nil {
			t.Fatalf("block of another workspace: %+v", b)
		}
		cfg := must(c.GetSystemConfig(ctx))
		if cfg.DefaultS3BucketCluster == "" || *cfg.OperatorBlockVersion != "0.1.0" {
			t.Fatalf("config %+v", cfg)
		}
		if _, err := c.PatchSystemConfig(ctx, map[string]any{"OPERATOR_ROLLOUT_PERCENTAGE": 50}); !polycrate.IsForbidden(err) {
			t.Fatalf("agent patch: %v", err)
		}
		sys := e.client(t, emulator.DevSystemToken)
		keys := must(sys.PatchSystemConfig(ctx, map[string]any{"OPERATOR_ROLLOUT_PERCENTAGE": 50}))
		if len(keys) != 1 {
			t.Fatalf("updated %v", keys)
		}
		if _, err := sys.PatchSystemConfig(ctx, map[string]any{"OPERATOR_ROLLOUT_PERCENTAGE": 150}); !polycrate.IsValidation(err) {
			t.Fatalf("out of range: %v", err)
		}
		ro := must(sys.GetOperatorRollout(ctx))
		if len(ro.Clusters) == 0 {
			t.Fatal("rollout aggregate")
		}
		// A customer's token sees its own clusters' rows only, and may not steer.
		own := must(c.GetOperatorRollout(ctx))
		if len(own.Clusters) != 1 || own.Clusters[0].WorkspaceName != "production" {
			t.Fatalf("an agent's rollout rows: %+v", own.Clusters)
		}
		if _, err := c.PauseOperatorRollout(ctx, own.Clusters[0].ClusterID); !polycrate.IsForbidden(err) {
			t.Fatalf("agent pauses: %v", err)
		}
		if len(must(c.Pops().List(ctx, nil))) != 2 || len(must(c.Organizations().List(ctx, nil))) != 1 {
			t.Fatal("PoPs are global; an agent sees only its own organization")
		}
	})
}

func TestAdoptOnConflict(t *testing.T) {
	e := newEnv(t, emulator.Config{})
	ctx := context.Background()
	c := e.client(t, emulator.DevAgentToken)
	first := must(c.K8sClusters().Create(ctx, polycrate.K8sClusterRequest{Kind: "generic", Name: "a"}))
	_, err := c.K8sClusters().Create(ctx, polycrate.K8sClusterRequest{Kind: "generic", Name: "b"})
	if !polycrate.IsConflict(err) || polycrate.IsPermanent(err) || polycrate.IsTransient(err) {
		t.Fatalf("second cluster: %v", err)
	}
	rows := must(c.K8sClusters().List(ctx, nil))
	if len(rows) != 1 || rows[0].ID != first.ID {
		t.Fatalf("adopt: %+v", rows)
	}
	if n := len(e.srv.Collisions()); n != 0 {
		t.Fatalf("collisions %d", n)
	}
}

// The operator's lookup refusing such an ambiguity is apisync's TestFindRefusesAmbiguity.
func TestCollisionsAreVisible(t *testing.T) {
	e := newEnv(t, emulator.Config{})
	ctx := context.Background()
	c := e.client(t, emulator.DevAgentToken)
	req := polycrate.EndpointRequest{Name: "dup", RemoteAddress: "d.example.com"}
	must(c.Endpoints().Create(ctx, req))
	must(c.Endpoints().Create(ctx, req))
	if cs := e.srv.Collisions(); len(cs) != 1 || cs[0].Key != "name=dup" {
		t.Fatalf("collisions %+v", cs)
	}
}

func TestListFollowsNext(t *testing.T) {
	e := newEnv(t, emulator.Config{MaxPageSize: 7})
	ctx := context.Background()
	c := e.client(t, emulator.DevAgentToken)
	for i := 0; i < 23; i++ {
		must(c.Hosts().Create(ctx, polycrate.HostRequest{Name: fmt.Sprintf("h-%d", i), Hostname: "h"}))
	}
	before := e.srv.Counters()["hosts"].Reads
	rows := must(c.Hosts().List(ctx, nil))
	seen := map[string]bool{}
	for _, r := range rows {
		seen[r.ID] = true
	}
	if len(rows) != 23 || len(seen) != 23 {
		t.Fatalf("%d rows, %d distinct", len(rows), len(seen))
	}
	if reads := e.srv.Counters()["hosts"].Reads - before; reads != 4 {
		t.Fatalf("%d page requests for 23 rows of 7, want 4", reads)
	}
}

func TestErrorsAreTyped(t *testing.T) {
	e := newEnv(t, emulator.Config{})
	ctx := context.Background()
	c := e.client(t, emulator.DevAgentToken)

	_, err := e.client(t, "").Endpoints().List(ctx, nil)
	if !polycrate.IsUnauthorized(err) || !polycrate.IsPermanent(err) {
		t.Fatalf("empty token: %v", err)
	}
	bad := "definitely-not-a-token-9f8e7d"
	_, err = e.client(t, bad).Endpoints().List(ctx, nil)
	if !polycrate.IsUnauthorized(err) || strings.Contains(err.Error(), bad) {
		t.Fatalf("bad token: %v", err)
	}
	ep := must(c.Endpoints().Create(ctx, polycrate.EndpointRequest{Name: "mine", RemoteAddress: "m.example.com"}))
	_, err = e.client(t, otherToken).Endpoints().Get(ctx, ep.ID)
	if !polycrate.IsNotFound(err) || polycrate.IgnoreNotFound(err) != nil {
		t.Fatalf("another workspace's endpoint: %v", err)
	}
	if err := e.client(t, otherToken).Endpoints().Delete(ctx, ep.ID); !polycrate.IsNotFound(err) {
		t.Fatalf("deleting across workspaces: %v", err)
	}
	_, err = c.Endpoints().Create(ctx, polycrate.EndpointRequest{Name: "x", RemoteAddress: "x", RemotePort: polycrate.Ptr(70000)})
	items := polycrate.ValidationErrors(err)
	if len(items) != 1 || *items[0].Attr != "remote_port" || items[0].Code != "max_value" || !strings.Contains(err.Error(), "remote_port") {
		t.Fatalf("validation: %v", err)
	}
	tokErr := errors.New("secret polycrate-api-creds not found")
	failing, _ := polycrate.New(polycrate.Options{BaseURL: e.url, Token: func(context.Context) (string, error) { return "", tokErr }})
	var te *polycrate.TokenError
	if _, err := failing.Endpoints().List(ctx, nil); !errors.As(err, &te) || !errors.Is(err, tokErr) {
		t.Fatalf("token source failure: %v", err)
	}
}

func TestRetryAfterIsHonoured(t *testing.T) {
	e := newEnv(t, emulator.Config{})
	ctx := context.Background()
	var waits []time.Duration
	c := e.client(t, emulator.DevAgentToken)
	polycrate.SetSleep(c, func(_ context.Context, d time.Duration) error { waits = append(waits, d); return nil })

	if err := e.srv.SetFaults(emulator.FaultRule{Path: "/api/v1/endpoints/", Status: 429, RetryAfter: 3, Times: 2}); err != nil {
		t.Fatal(err)
	}
	ep, err := c.Endpoints().Create(ctx, polycrate.EndpointRequest{Name: "after-429", RemoteAddress: "a.example.com"})
	if err != nil {
		t.Fatalf("429 twice then success: %v", err)
	}
	if len(waits) != 2 || waits[0] != 3*time.Second || waits[1] != 3*time.Second {
		t.Fatalf("waits %v", waits)
	}
	if c := e.srv.Counters()["endpoints"]; c.ByMethod["POST"] != 3 {
		t.Fatalf("%d POSTs, want 3", c.ByMethod["POST"])
	}
	if ep.ID == "" {
		t.Fatal("no object")
	}
	// A wait longer than MaxRetryWait goes back to the caller with the wait.
	waits = nil
	if err := e.srv.SetFaults(emulator.FaultRule{Path: "/api/v1/hosts/", Status: 429, RetryAfter: 120}); err != nil {
		t.Fatal(err)
	}
	_, err = c.Hosts().List(ctx, nil)
	if !polycrate.IsRateLimited(err) || polycrate.RetryAfter(err) != 120*time.Second || !polycrate.IsTransient(err) || len(waits) != 0 {
		t.Fatalf("long Retry-After: %v (waits %v)", err, waits)
	}
}

func TestTransientFailures(t *testing.T) {
	e := newEnv(t, emulator.Config{})
	ctx := context.Background()
	c := e.client(t, emulator.DevAgentToken)
	polycrate.SetSleep(c, func(context.Context, time.Duration) error { return nil })

	// A GET is retried through a 500.
	if err := e.srv.SetFaults(emulator.FaultRule{Path: "/api/v1/hosts/", Method: "GET", Status: 500, Times: 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Hosts().List(ctx, nil); err != nil {
		t.Fatalf("GET after one 500: %v", err)
	}
	// A write is not retried: the caller decides (it adopts by natural key first).
	if err := e.srv.SetFaults(emulator.FaultRule{Path: "/api/v1/hosts/", Method: "POST", Status: 503, Times: 1}); err != nil {
		t.Fatal(err)
	}
	before := e.srv.Counters()["hosts"].Writes
	_, err := c.Hosts().Create(ctx, polycrate.HostRequest{Name: "h", Hostname: "h"})
	if !polycrate.IsServerError(err) || !polycrate.IsTransient(err) || polycrate.IsPermanent(err) {
		t.Fatalf("POST 503: %v", err)
	}
	if n := e.srv.Counters()["hosts"].Writes - before; n != 1 {
		t.Fatalf("POST sent %d times", n)
	}
	// A dropped connection is a transport error.
	if err := e.srv.SetFaults(emulator.FaultRule{Path: "/api/v1/pops/", Drop: true}); err != nil {
		t.Fatal(err)
	}
	_, err = c.Pops().List(ctx, nil)
	var te *polycrate.TransportError
	if !errors.As(err, &te) || !polycrate.IsTransient(err) {
		t.Fatalf("dropped connection: %v", err)
	}
	// A slow API hits the per-request timeout.
	slow := e.client(t, emulator.DevAgentToken, func(o *polycrate.Options) { o.Timeout = 100 * time.Millisecond; o.MaxRetries = 1 })
	polycrate.SetSleep(slow, func(context.Context, time.Duration) error { return nil })
	if err := e.srv.SetFaults(emulator.FaultRule{Path: "/api/v1/blocks/", LatencyMS: 1000}); err != nil {
		t.Fatal(err)
	}
	if _, err := slow.Blocks().List(ctx, nil); !errors.As(err, &te) {
		t.Fatalf("timeout: %v", err)
	}
}

func TestMetrics(t *testing.T) {
	e := newEnv(t, emulator.Config{})
	reg := prometheus.NewRegistry()
	m, err := polycrate.NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	c := e.client(t, emulator.DevAgentToken, func(o *polycrate.Options) { o.Metrics = m })
	ctx := context.Background()
	must(c.Endpoints().Create(ctx, polycrate.EndpointRequest{Name: "m", RemoteAddress: "m"}))
	_, _ = c.Endpoints().Create(ctx, polycrate.EndpointRequest{Name: "BAD", RemoteAddress: "m"})
	expected := `
# HELP polycrate_api_requests_total Requests to the Polycrate API by resource, method and status code.
# TYPE polycrate_api_requests_total counter
polycrate_api_requests_total{code="201",method="POST",resource="endpoints"} 1
polycrate_api_requests_total{code="400",method="POST",resource="endpoints"} 1
`
	if err := promtest.GatherAndCompare(reg, strings.NewReader(expected), "polycrate_api_requests_total"); err != nil {
		t.Fatal(err)
	}
	if n := promtest.CollectAndCount(reg, "polycrate_api_request_duration_seconds"); n != 1 {
		t.Fatalf("%d duration series", n)
	}
	// Set up again in the same process (a restart in a test suite): the same
	// series go on counting.
	again, err := polycrate.NewMetrics(reg)
	if err != nil {
		t.Fatalf("registering again: %v", err)
	}
	c2 := e.client(t, emulator.DevAgentToken, func(o *polycrate.Options) { o.Metrics = again })
	must(c2.Endpoints().Create(ctx, polycrate.EndpointRequest{Name: "m2", RemoteAddress: "m2"}))
	expected = strings.Replace(expected, `code="201",method="POST",resource="endpoints"} 1`, `code="201",method="POST",resource="endpoints"} 2`, 1)
	if err := promtest.GatherAndCompare(reg, strings.NewReader(expected), "polycrate_api_requests_total"); err != nil {
		t.Fatal(err)
	}
}

func TestTokenRotationTakesEffect(t *testing.T) {
	e := newEnv(t, emulator.Config{})
	var mu sync.Mutex
	token := "stale-token"
	c := e.client(t, "", func(o *polycrate.Options) {
		o.Token = func(context.Context) (string, error) { mu.Lock(); defer mu.Unlock(); return token, nil }
	})
	if _, err := c.ReportHealth(context.Background(), polycrate.HealthReport{}); !polycrate.IsUnauthorized(err) {
		t.Fatalf("stale token: %v", err)
	}
	mu.Lock()
	token = emulator.DevAgentToken
	mu.Unlock()
	if _, err := c.ReportHealth(context.Background(), polycrate.HealthReport{}); err != nil {
		t.Fatalf("rotated token: %v", err)
	}
}

// redirector answers every request with code and a Location on target (same path),
// counting what reaches it and whether the token came along.
func redirector(t *testing.T, code int, target func() string) (string, *sync.Map) {
	t.Helper()
	seen := &sync.Map{}
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen.Store(r.Method+" "+r.URL.Path, r.Header.Get("Authorization") != "")
		http.Redirect(w, r, target()+r.URL.Path, code)
	}))
	t.Cleanup(ts.Close)
	return ts.URL, seen
}

// A write is never reported done unless the API confirmed it: a redirect to
// another origin (the classic http:// in front of an https API) is an error that
// names the target, and neither the write nor the token reaches it.
func TestRedirectsAreNotFollowedToAnotherOrigin(t *testing.T) {
	e := newEnv(t, emulator.Config{})
	for _, code := range []int{http.StatusMovedPermanently, http.StatusFound, http.StatusSeeOther, http.StatusTemporaryRedirect, http.StatusPermanentRedirect} {
		t.Run(fmt.Sprint(code), func(t *testing.T) {
			front, _ := redirector(t, code, func() string { return e.url })
			c, err := polycrate.New(polycrate.Options{BaseURL: front, Token: polycrate.StaticToken(emulator.DevAgentToken)})
			if err != nil {
				t.Fatal(err)
			}
			writes := e.srv.Counters()["endpoints"].Writes
			reads := e.srv.Counters()["endpoints"].Reads
			_, err = c.Endpoints().Create(context.Background(), polycrate.EndpointRequest{Name: "redirected", RemoteAddress: "r.example.com"})
			var re *polycrate.RedirectError
			if !errors.As(err, &re) {
				t.Fatalf("create through a %d: err %v, want a RedirectError", code, err)
			}
			if !strings.Contains(err.Error(), "api_url redirects to "+e.url+"/api/v1/endpoints/") || !polycrate.IsPermanent(err) || polycrate.IsTransient(err) {
				t.Fatalf("error %q: want the Location named, permanent", err)
			}
			if strings.Contains(err.Error(), emulator.DevAgentToken) {
				t.Fatal("the token is in the error")
			}
			// A GET is not followed to another origin either (the token would go along).
			if _, err := c.Endpoints().List(context.Background(), nil); !polycrate.IsRedirect(err) {
				t.Fatalf("list through a %d: err %v, want a RedirectError", code, err)
			}
			if got := e.srv.Counters()["endpoints"]; got.Writes != writes || got.Reads != reads {
				t.Fatalf("requests reached the redirect target: writes %d→%d, reads %d→%d", writes, got.Writes, reads, got.Reads)
			}
		})
	}
}

// Within one origin a GET may be redirected, and a write only by 307/308, which
// keep the method and body; a 301/302/303 of a write would become a GET.
func TestSameOriginRedirects(t *testing.T) {
	e := newEnv(t, emulator.Config{})
	h := e.srv.Handler()
	var mu sync.Mutex
	methods := map[string]int{}
	mux := http.NewServeMux()
	mux.HandleFunc("/old/", func(w http.ResponseWriter, r *http.Request) {
		code := http.StatusMovedPermanently
		if r.Header.Get("X-Test-Code") != "" {
			fmt.Sscan(r.Header.Get("X-Test-Code"), &code)
		}
		http.Redirect(w, r, strings.TrimPrefix(r.URL.Path, "/old"), code)
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		methods[r.Method]++
		mu.Unlock()
		h.ServeHTTP(w, r)
	})
	ts := httptest.NewServer(mux)
	t.Cleanup(ts.Close)

	for _, tc := range []struct {
		code   int
		follow bool
	}{{http.StatusMovedPermanently, false}, {http.StatusFound, false}, {http.StatusSeeOther, false},
		{http.StatusTemporaryRedirect, true}, {http.StatusPermanentRedirect, true}} {
		t.Run(fmt.Sprint(tc.code), func(t *testing.T) {
			hc := &http.Client{Transport: headerTransport{"X-Test-Code": fmt.Sprint(tc.code)}}
			c, err := polycrate.New(polycrate.Options{BaseURL: ts.URL + "/old", Token: polycrate.StaticToken(emulator.DevAgentToken), HTTPClient: hc})
			if err != nil {
				t.Fatal(err)
			}
			mu.Lock()
			clear(methods)
			mu.Unlock()
			ep, err := c.Endpoints().Create(context.Background(), polycrate.EndpointRequest{Name: fmt.Sprintf("same-origin-%d", tc.code), RemoteAddress: "s.example.com"})
			mu.Lock()
			got := maps.Clone(methods)
			mu.Unlock()
			if tc.follow {
				if err != nil || ep.ID == "" || got[http.MethodPost] != 1 || got[http.MethodGet] != 0 {
					t.Fatalf("a %d of a POST within the origin: err %v, id %q, methods %v; want it followed as a POST", tc.code, err, ep.ID, got)
				}
				return
			}
			if !polycrate.IsRedirect(err) || got[http.MethodGet]+got[http.MethodPost] != 0 {
				t.Fatalf("a %d of a POST: err %v, methods %v; want a RedirectError and nothing sent on", tc.code, err, got)
			}
			// A GET within the origin is followed whatever the code.
			if _, err := c.Endpoints().List(context.Background(), nil); err != nil {
				t.Fatalf("a %d of a GET within the origin: %v", tc.code, err)
			}
		})
	}
}

type headerTransport map[string]string

func (h headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range h {
		r.Header.Set(k, v)
	}
	return http.DefaultTransport.RoundTrip(r)
}

// A create whose answer has no id is not a create: without the id the object
// could never be found again, and calling it done loses it.
func TestCreateWithoutAnIDIsAnError(t *testing.T) {
	for _, body := range []string{`{}`, `{"id": ""}`, `{"id": null}`, `{"count": 0, "results": []}`, ``} {
		ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusCreated)
			fmt.Fprint(w, body)
		}))
		c, err := polycrate.New(polycrate.Options{BaseURL: ts.URL, Token: polycrate.StaticToken("t")})
		if err != nil {
			t.Fatal(err)
		}
		_, err = c.Endpoints().Create(context.Background(), polycrate.EndpointRequest{Name: "x", RemoteAddress: "x"})
		ts.Close()
		if err == nil || !strings.Contains(err.Error(), "not confirmed") && !strings.Contains(err.Error(), "unexpected answer") {
			t.Fatalf("answer %q: err %v, want an error", body, err)
		}
		if !polycrate.IsPermanent(err) {
			t.Fatalf("answer %q: %v should be permanent", body, err)
		}
	}
}
