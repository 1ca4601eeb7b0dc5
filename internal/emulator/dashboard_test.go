package emulator_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/polycrate/polycrate-operator/internal/emulator"
	"github.com/polycrate/polycrate-operator/internal/testutil"
)

// browser is a headless Chromium from Debian's packages (`make chromium`, and
// .ci/run, install it).
func browser(t *testing.T) context.Context {
	t.Helper()
	path := ""
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			path = p
			break
		}
	}
	if path == "" {
		t.Fatal("no headless Chromium: install Debian's chromium (`make chromium` does as root; .ci/run does)")
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(path), chromedp.NoSandbox,
		chromedp.Flag("disable-gpu", true), chromedp.Flag("disable-dev-shm-usage", true), chromedp.WindowSize(1400, 900))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	ctx, cancelTimeout := context.WithTimeout(ctx, 2*time.Minute)
	t.Cleanup(func() { cancelTimeout(); cancel(); cancelAlloc() })
	return ctx
}

func call(t *testing.T, base, token, method, path string, body any) map[string]any {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = strings.NewReader(string(b))
	}
	req, _ := http.NewRequest(method, base+path, rd)
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out := map[string]any{}
	_ = json.NewDecoder(resp.Body).Decode(&out)
	if resp.StatusCode >= 300 {
		t.Fatalf("%s %s: %d %v", method, path, resp.StatusCode, out)
	}
	return out
}

func do(t *testing.T, ctx context.Context, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	if err := chromedp.Do(ctx, steps...); err != nil {
		t.Fatal(err)
	}
}

func get[T any](t *testing.T, ctx context.Context, a chromedp.Action[T]) T {
	t.Helper()
	v, err := chromedp.Run(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestRolloutDashboardInABrowser: the page renders every cluster's row with the
// seed's columns and the version histogram, and its buttons change the API's
// state. The screenshot lands in bin/test-output/ (not committed).
func TestRolloutDashboardInABrowser(t *testing.T) {
	seed, err := emulator.ParseSeed(emulator.DefaultSeedYAML)
	if err != nil {
		t.Fatal(err)
	}
	tokens := []string{emulator.DevAgentToken}
	for i := 1; i <= 3; i++ {
		tok := fmt.Sprintf("fleet-token-%d", i)
		tokens = append(tokens, tok)
		seed.Organizations[0].Workspaces = append(seed.Organizations[0].Workspaces,
			emulator.SeedWorkspace{Name: fmt.Sprintf("customer-%d", i), Pop: "fra1", Tokens: []string{tok}})
	}
	srv, err := emulator.New(emulator.Config{Seed: seed})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv.Handler())
	defer ts.Close()
	clusters := map[string]string{}
	for i, tok := range tokens {
		call(t, ts.URL, tok, "POST", "/api/v1/agent/health/", map[string]any{"kind": "operator", "version": "0.1.0"})
		c := call(t, ts.URL, tok, "POST", "/api/v1/kubernetes/clusters/", map[string]any{"kind": "generic", "name": fmt.Sprintf("cluster-%d", i)})
		clusters[tok] = c["id"].(string)
		version := "0.34.0"
		if i == 3 {
			version = "0.35.0"
		}
		call(t, ts.URL, tok, "POST", "/api/v1/kubernetes/apps/", map[string]any{"name": "polycrate-operator", "kind": "polycrate",
			"k8s_cluster": c["id"], "installed_version": version})
	}
	call(t, ts.URL, emulator.DevSystemToken, "PATCH", "/api/v1/system/config/", map[string]any{"OPERATOR_BLOCK_VERSION": "0.35.0", "OPERATOR_ROLLOUT_PERCENTAGE": 25})
	status := func(tok string) string {
		t.Helper()
		agg := call(t, ts.URL, emulator.DevSystemToken, "GET", "/api/v1/operator-rollout/", nil)
		for _, r := range agg["clusters"].([]any) {
			if row := r.(map[string]any); row["cluster_id"] == clusters[tok] {
				return row["rollout_status"].(string)
			}
		}
		return ""
	}
	// 25 % of 4 = 1 at a time: one of the three on 0.34.0 updates, two wait.
	var waiting string
	for _, tok := range tokens[:3] {
		if status(tok) == emulator.RolloutWaitingCanary && waiting == "" {
			waiting = tok
		}
	}
	if waiting == "" {
		t.Fatal("no cluster waits behind the canary gate")
	}

	ctx := browser(t)
	row := fmt.Sprintf(`tr[data-cluster="%s"]`, clusters[waiting])
	do(t, ctx, chromedp.Navigate(ts.URL+"/system/operator-rollout/"), chromedp.WaitVisible(`#clusters`))
	rows := get(t, ctx, chromedp.Evaluate[int](`document.querySelectorAll("#clusters tr[data-cluster]").length`))
	bars := get(t, ctx, chromedp.Evaluate[int](`document.querySelectorAll("#histogram .bar").length`))
	summary := get(t, ctx, chromedp.Text(`#histogram-summary`))
	if rows != 4 || bars != 2 || summary != "3 × 0.34.0, 1 × 0.35.0" {
		t.Fatalf("page: %d rows, %d bars, histogram %q", rows, bars, summary)
	}
	target := get(t, ctx, chromedp.Text(`#target`))
	waitingStatus := get(t, ctx, chromedp.Text(row+` td.status`))
	blockers := get(t, ctx, chromedp.Text(row+` td.blockers`))
	if !strings.Contains(target, "0.35.0") || !strings.Contains(target, "25 %") || waitingStatus != emulator.RolloutWaitingCanary ||
		!strings.Contains(blockers, "canary gate") {
		t.Fatalf("target %q, waiting row %q %q", target, waitingStatus, blockers)
	}
	headers := get(t, ctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll("#clusters th")].map(h => h.textContent)`))
	for _, want := range []string{"Workspace / Cluster", "Installed version", "Desired version", "Heartbeat", "State", "Rollout status", "Blockers"} {
		if !strings.Contains(strings.Join(headers, "|"), want) {
			t.Fatalf("columns %v lack %q", headers, want)
		}
	}
	// The biggest bar is full width, the other a third of it.
	widths := get(t, ctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll("#histogram .fill")].map(b => b.style.width)`))
	if strings.Join(widths, " ") != "100% 33%" {
		t.Fatalf("bar widths %v", widths)
	}

	// The buttons: force the waiting cluster, then pause it.
	do(t, ctx, chromedp.Click(row+` button.force`), chromedp.WaitVisible(row+` td.s-forced`))
	if s := status(waiting); s != emulator.RolloutForced {
		t.Fatalf("after Force update the API says %s", s)
	}
	do(t, ctx, chromedp.Click(row+` button.pause`), chromedp.WaitVisible(row+` td.s-paused`))
	if s := status(waiting); s != emulator.RolloutPaused {
		t.Fatalf("after Pause the API says %s", s)
	}

	png := get(t, ctx, chromedp.FullScreenshot(100))
	dir := filepath.Join(testutil.RepoRoot(), "bin", "test-output")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	shot := filepath.Join(dir, "rollout-dashboard.png")
	if err := os.WriteFile(shot, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s (%d bytes)", shot, len(png))
}
