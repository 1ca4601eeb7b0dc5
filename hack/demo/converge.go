package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	corev1 "k8s.io/api/core/v1"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/polycrate/polycrate-operator/api/v1alpha1"
	"github.com/polycrate/polycrate-operator/internal/polycrate"
)

// expectation is one kind the demo waits for: at least min objects, each in a
// finished phase.
type expectation struct {
	kind string
	list client.ObjectList
	min  int
	done []string // phases that count as converged
}

var expectations = []expectation{
	{"Endpoint", &v1.EndpointList{}, 8, []string{"synced"}},
	{"K8sApp", &v1.K8sAppList{}, 3, []string{"Synced"}},
	{"Host", &v1.HostList{}, 3, []string{"Synced"}},
	{"K8sVolume", &v1.K8sVolumeList{}, 1, []string{"Synced"}},
	{"Backup", &v1.BackupList{}, 1, []string{"Synced"}},
	{"BackupSchedule", &v1.BackupScheduleList{}, 1, []string{"Synced"}},
	{"Certificate", &v1.CertificateList{}, 1, []string{"Synced"}},
	{"S3Bucket", &v1.S3BucketList{}, 1, []string{"Ready"}},
}

// checked are the Endpoints the monitoring agent must have checked, with the
// state their local target gives.
var checked = map[string]string{"shop/status-ok": "up", "shop/status-down": "down", v1.DefaultOperatorNamespace + "/*": "up"}

// pending lists what has not converged yet ("" when everything has).
func pending(ctx context.Context, c client.Client) string {
	var missing []string
	eps := &v1.EndpointList{}
	if err := c.List(ctx, eps); err == nil {
		for key, want := range checked {
			found := false
			for _, ep := range eps.Items {
				if key != ep.Namespace+"/"+ep.Name && key != ep.Namespace+"/*" {
					continue
				}
				found = true
				if m := ep.Status.Monitoring; m == nil || m.State != want {
					missing = append(missing, fmt.Sprintf("Endpoint %s/%s: not checked as %s yet", ep.Namespace, ep.Name, want))
				}
			}
			if !found {
				missing = append(missing, "Endpoint "+key+": not there yet")
			}
		}
	}
	for _, e := range expectations {
		if err := c.List(ctx, e.list); err != nil {
			missing = append(missing, fmt.Sprintf("%s: %v", e.kind, err))
			continue
		}
		items, _ := meta.ExtractList(e.list)
		if len(items) < e.min {
			missing = append(missing, fmt.Sprintf("%s: %d of %d", e.kind, len(items), e.min))
			continue
		}
		for _, it := range items {
			u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(it)
			if err != nil {
				continue
			}
			phase, _, _ := unstructured.NestedString(u, "status", "phase")
			msg, _, _ := unstructured.NestedString(u, "status", "message")
			if !slices.Contains(e.done, phase) {
				o := it.(client.Object)
				missing = append(missing, fmt.Sprintf("%s %s/%s: phase %q %s", e.kind, o.GetNamespace(), o.GetName(), phase, msg))
			}
		}
	}
	// The cloud controller: worker-3 initialized, shop-lb with its address.
	n := &corev1.Node{}
	if err := c.Get(ctx, client.ObjectKey{Name: "worker-3"}, n); err != nil || n.Spec.ProviderID == "" {
		missing = append(missing, "Node worker-3: not initialized by the cloud controller yet")
	}
	svc := &corev1.Service{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: "shop", Name: "shop-lb"}, svc); err != nil || len(svc.Status.LoadBalancer.Ingress) == 0 {
		missing = append(missing, "Service shop/shop-lb: no load balancer address yet")
	}
	return strings.Join(missing, "; ")
}

// waitConverged polls until everything converged or the deadline passes.
func waitConverged(ctx context.Context, c client.Client, within time.Duration) error {
	deadline := time.Now().Add(within)
	for {
		left := pending(ctx, c)
		if left == "" {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not converged within %s: %s", within, left)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// waitChecked polls the API until the operator's agent has reported a check of
// each local target (the results travel with the health report).
func waitChecked(ctx context.Context, api *polycrate.Client, within time.Duration) error {
	deadline := time.Now().Add(within)
	want := []string{"shop-127-0-0-1-", "shop-localhost-", "status-tcp"}
	for {
		seen := map[string]bool{}
		agents, err := api.Agents().List(ctx, polycrate.Query())
		if err == nil {
			for _, ag := range agents {
				if ag.Kind != "operator" {
					continue
				}
				rows, err := api.Assignments(ctx, ag.ID)
				if err != nil {
					continue
				}
				for _, r := range rows {
					for _, w := range want {
						if strings.HasPrefix(r.EndpointName, w) && r.LastCheckAt != nil {
							seen[w] = true
						}
					}
				}
			}
		}
		if len(seen) == len(want) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the API holds check results of %d of the %d local targets after %s", len(seen), len(want), within)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// printAPI prints what the Polycrate API now holds, as the agent sees it.
func printAPI(ctx context.Context, w io.Writer, api *polycrate.Client) error {
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "API RESOURCE\tNAME\tDETAILS")
	add := func(resource, name, details string) { fmt.Fprintf(tw, "%s\t%s\t%s\n", resource, name, details) }
	for _, section := range []func(context.Context, *polycrate.Client, func(resource, name, details string)) error{
		printEndpoints, printApps, printInventory, printServices} {
		if err := section(ctx, api, add); err != nil {
			return err
		}
	}
	return tw.Flush()
}

// printEndpoints: every endpoint with its app, state and the agent's last check.
func printEndpoints(ctx context.Context, api *polycrate.Client, add func(resource, name, details string)) error {
	eps, err := api.Endpoints().List(ctx, polycrate.Query())
	if err != nil {
		return err
	}
	lastChecks := map[string]polycrate.Assignment{}
	if agents, err := api.Agents().List(ctx, polycrate.Query()); err == nil {
		for _, ag := range agents {
			if ag.Kind != "operator" {
				continue
			}
			rows, err := api.Assignments(ctx, ag.ID)
			if err != nil {
				return err
			}
			for _, r := range rows {
				lastChecks[r.EndpointID] = r
			}
		}
	}
	for _, e := range eps {
		d, err := api.Endpoints().Get(ctx, e.ID)
		if err != nil {
			return err
		}
		check := "not checked yet"
		if a, ok := lastChecks[d.ID]; ok && a.LastCheckAt != nil {
			check = fmt.Sprintf("checked %d×, last %s", a.ChecksExecuted, map[bool]string{true: "ok", false: "FAILED"}[deref(a.LastCheckSuccess)])
			if a.LastCheckStatusCode != nil {
				check += fmt.Sprintf(" (%d)", *a.LastCheckStatusCode)
			}
			if a.LastCheckErrorName != "" {
				check += ": " + a.LastCheckErrorName
			}
		}
		add("endpoints", d.RemoteAddress, fmt.Sprintf("%s port %d, %s, state %s, %s", d.Kind, deref(d.RemotePort), appOf(d.K8sApp), orDash(string(d.State)), check))
	}
	return nil
}

// printApps: the Kubernetes apps.
func printApps(ctx context.Context, api *polycrate.Client, add func(resource, name, details string)) error {
	apps, err := api.K8sApps().List(ctx, polycrate.Query())
	if err != nil {
		return err
	}
	sort.Slice(apps, func(i, j int) bool { return apps[i].ID < apps[j].ID })
	for _, a := range apps {
		d, err := api.K8sApps().Get(ctx, a.ID)
		if err != nil {
			return err
		}
		src := ""
		if d.Source != nil {
			src = *d.Source
		}
		add("kubernetes/apps", d.Name, fmt.Sprintf("kind %s, source %s, pods %d/%d ready, installed %v, byoa %v, block linked %v",
			d.Kind, orDash(src), d.PodsReady, d.PodsTotal, d.Installed, d.BYOA, d.Block != nil))
	}
	return nil
}

// printInventory: hosts, volumes, backups, backup schedules, certificates.
func printInventory(ctx context.Context, api *polycrate.Client, add func(resource, name, details string)) error {
	hosts, err := api.Hosts().List(ctx, polycrate.Query())
	if err != nil {
		return err
	}
	for _, h := range hosts {
		d, err := api.Hosts().Get(ctx, h.ID)
		if err != nil {
			return err
		}
		add("hosts", d.Hostname, fmt.Sprintf("%s, %d cores, %d MB, %s", deref(d.DefaultIPv4), deref(d.ResourceCPUCores), deref(d.ResourceMemory), deref(d.ProviderReference)))
	}
	vols, err := api.K8sVolumes().List(ctx, polycrate.Query())
	if err != nil {
		return err
	}
	for _, v := range vols {
		d, err := api.K8sVolumes().Get(ctx, v.ID)
		if err != nil {
			return err
		}
		add("kubernetes/volumes", d.Name, fmt.Sprintf("%s, %d bytes, claim %s/%s", d.Phase, deref(d.CapacityBytes), deref(d.PVCNamespace), deref(d.PVCName)))
	}
	backups, err := api.Backups().List(ctx, polycrate.Query())
	if err != nil {
		return err
	}
	for _, b := range backups {
		add("backups/backups", b.Name, fmt.Sprintf("%s, %s, %s", b.Provider, b.Kind, b.Status))
	}
	schedules, err := api.BackupSchedules().List(ctx, polycrate.Query())
	if err != nil {
		return err
	}
	for _, s := range schedules {
		d, err := api.BackupSchedules().Get(ctx, s.ID)
		if err != nil {
			return err
		}
		add("backups/backup-schedules", d.Name, fmt.Sprintf("%s, %q, paused %v", d.Provider, deref(d.ScheduleCron), d.Paused))
	}
	certs, err := api.Certificates().List(ctx, polycrate.Query())
	if err != nil {
		return err
	}
	for _, ct := range certs {
		add("certificates", ct.Name, fmt.Sprintf("%s/%s, %s", ct.Namespace, ct.Name, ct.CertificateStatus))
	}
	return nil
}

// printServices: load balancers and S3 buckets.
func printServices(ctx context.Context, api *polycrate.Client, add func(resource, name, details string)) error {
	lbs, err := api.LoadBalancers().List(ctx, polycrate.Query())
	if err != nil {
		return err
	}
	for _, l := range lbs {
		d, err := api.LoadBalancers().Get(ctx, l.ID)
		if err != nil {
			return err
		}
		var ports []string
		for _, p := range d.Ports {
			ports = append(ports, fmt.Sprintf("%d→NodePort %d", p.Port, p.TargetPort))
		}
		add("loadbalancers/instances", deref(d.DisplayName), fmt.Sprintf("%s, %s", orDash(d.Address()), strings.Join(ports, " ")))
	}
	buckets, err := api.Buckets().List(ctx, polycrate.Query())
	if err != nil {
		return err
	}
	for _, b := range buckets {
		d, err := api.Buckets().Get(ctx, b.ID)
		if err != nil {
			return err
		}
		add("s3/buckets", d.Name, deref(d.S3Endpoint))
	}
	return nil
}

func appOf(r *polycrate.Ref) string {
	if r == nil {
		return "no app"
	}
	return "app " + r.ID
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}
