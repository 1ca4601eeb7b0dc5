package cloud

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	cloudprovider "k8s.io/cloud-provider"
	cloudproviderapi "k8s.io/cloud-provider/api"
	servicehelper "k8s.io/cloud-provider/service/helpers"

	"github.com/polycrate/polycrate-operator/internal/polycrate"
)

// Labels on a load balancer instance: the Service it belongs to. The UID is the
// natural key the operator finds (adopts) an instance by.
const (
	LabelServiceUID = "polycrate.io/service-uid"
	LabelService    = "polycrate.io/service"
	LabelClusterID  = "polycrate.io/cluster-id"
	LabelManagedBy  = "app.kubernetes.io/managed-by"
	managedBy       = "polycrate-operator"
)

// balancers is the LoadBalancer implementation the upstream service controller
// calls for every Service of type LoadBalancer without a loadBalancerClass (the
// informer in front of it passes only the Services the scope manages, and those
// it must let go of, see controllers.go).
type balancers struct{ *Provider }

// GetLoadBalancerName is the instance's display name.
func (balancers) GetLoadBalancerName(_ context.Context, _ string, svc *corev1.Service) string {
	return svc.Namespace + "/" + svc.Name
}

// GetLoadBalancer reports whether the Service has an instance and its address.
func (b balancers) GetLoadBalancer(ctx context.Context, _ string, svc *corev1.Service) (*corev1.LoadBalancerStatus, bool, error) {
	c, err := b.client()
	if err != nil {
		return nil, false, err
	}
	lb, err := b.lookup(ctx, c, svc)
	if err != nil || lb == nil {
		return nil, false, err
	}
	return statusOf(lb), true, nil
}

// EnsureLoadBalancer creates or updates the Service's instance and returns its
// public address, waiting a little for a new one's.
func (b balancers) EnsureLoadBalancer(ctx context.Context, _ string, svc *corev1.Service, nodes []*corev1.Node) (*corev1.LoadBalancerStatus, error) {
	if !b.Manages(svc) {
		return nil, b.release(ctx, svc)
	}
	lb, err := b.ensure(ctx, svc, nodes)
	if err != nil {
		return nil, err
	}
	if lb.Address() == "" {
		if lb, err = b.awaitAddress(ctx, lb); err != nil {
			return nil, err
		}
	}
	return statusOf(lb), nil
}

// UpdateLoadBalancer follows a change of the node set.
func (b balancers) UpdateLoadBalancer(ctx context.Context, _ string, svc *corev1.Service, nodes []*corev1.Node) error {
	if !b.Manages(svc) {
		return cloudprovider.ImplementedElsewhere
	}
	_, err := b.ensure(ctx, svc, nodes)
	return err
}

// EnsureLoadBalancerDeleted deletes the Service's instance (gone is done).
func (b balancers) EnsureLoadBalancerDeleted(ctx context.Context, _ string, svc *corev1.Service) error {
	c, err := b.client()
	if err != nil {
		return err
	}
	lb, err := b.lookup(ctx, c, svc)
	if err != nil || lb == nil {
		return err
	}
	if err := c.LoadBalancers().Delete(ctx, lb.ID); err != nil && !polycrate.IsNotFound(err) {
		return fmt.Errorf("deleting load balancer instance %s: %w", lb.ID, err)
	}
	b.forget(svc.UID)
	b.Log.Info("load balancer instance deleted", "namespace", svc.Namespace, "service", svc.Name, "instance", lb.ID)
	return nil
}

// ensure makes the instance match the Service: adopt or create, then update
// what differs. An unchanged instance costs reads only.
func (b balancers) ensure(ctx context.Context, svc *corev1.Service, nodes []*corev1.Node) (*polycrate.LoadBalancer, error) {
	c, err := b.client()
	if err != nil {
		return nil, err
	}
	snap := b.Config.Get()
	clusterID := ""
	if snap != nil {
		clusterID = snap.LocalClusterID
	}
	want, err := Desired(svc, nodes, clusterID)
	if err != nil {
		return nil, err
	}
	lb, err := b.lookup(ctx, c, svc)
	if err != nil {
		return nil, err
	}
	if lb == nil {
		return b.create(ctx, c, svc, want)
	}
	if want.Matches(lb) {
		return lb, nil
	}
	labels := map[string]string{}
	for k, v := range lb.Labels {
		if s, ok := v.(string); ok {
			labels[k] = s
		}
	}
	maps.Copy(labels, want.Labels)
	if _, err := c.LoadBalancers().Patch(ctx, lb.ID, polycrate.LoadBalancerUpdateRequest{Config: &want.Config, Ports: want.Ports, Labels: labels}); err != nil {
		if polycrate.IsNotFound(err) {
			b.forget(svc.UID)
		}
		return nil, fmt.Errorf("updating load balancer instance %s: %w", lb.ID, err)
	}
	b.Log.Info("load balancer instance updated", "namespace", svc.Namespace, "service", svc.Name, "instance", lb.ID)
	return c.LoadBalancers().Get(ctx, lb.ID)
}

func (b balancers) create(ctx context.Context, c *polycrate.Client, svc *corev1.Service, want *Instance) (*polycrate.LoadBalancer, error) {
	oc, err := b.operatorConfig(ctx)
	if err != nil {
		return nil, err
	}
	st := oc.Status.APISync
	if st == nil || st.WorkspaceID == "" || st.OrganizationID == "" {
		return nil, errors.New("the agent's workspace is not resolved yet (OperatorConfig status.api_sync): a load balancer instance needs it")
	}
	name := svc.Namespace + "/" + svc.Name
	resp, err := c.CreateLoadBalancer(ctx, polycrate.LoadBalancerCreateRequest{Workspace: st.WorkspaceID, Organization: st.OrganizationID,
		DisplayName: &name, Config: &want.Config, Ports: want.Ports, Labels: want.Labels,
		ConsumerMeta: map[string]any{"kind": "kubernetes-service", "cluster_id": want.Labels[LabelClusterID],
			"namespace": svc.Namespace, "name": svc.Name, "uid": string(svc.UID)}})
	if err != nil {
		// A lost answer may have created it: the next attempt lists before creating.
		b.forgetAll()
		return nil, fmt.Errorf("creating a load balancer instance: %w", err)
	}
	b.remember(svc.UID, resp.ID)
	b.Log.Info("load balancer instance created", "namespace", svc.Namespace, "service", svc.Name, "instance", resp.ID)
	return c.LoadBalancers().Get(ctx, resp.ID)
}

// awaitAddress polls a new instance for its public address for AddressWait; then
// the Service is handed back: retried soon while the address is on its way, with
// backoff when the API says why there is none (e.g. an exhausted pool).
func (b balancers) awaitAddress(ctx context.Context, lb *polycrate.LoadBalancer) (*polycrate.LoadBalancer, error) {
	c, err := b.client()
	if err != nil {
		return nil, err
	}
	wait, poll := b.addressWait()
	deadline := time.Now().Add(wait)
	for lb.Address() == "" && !degraded(lb) && time.Now().Before(deadline) {
		t := time.NewTimer(poll)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		case <-t.C:
		}
		if lb, err = c.LoadBalancers().Get(ctx, lb.ID); err != nil {
			return nil, err
		}
	}
	switch {
	case lb.Address() != "":
		return lb, nil
	case degraded(lb):
		reason := "no reason given"
		if lb.StateReason != nil && *lb.StateReason != "" {
			reason = *lb.StateReason
		}
		return nil, fmt.Errorf("load balancer instance %s has no public address (state %s): %s", lb.ID, lb.State, reason)
	}
	return nil, cloudproviderapi.NewRetryError(fmt.Sprintf("load balancer instance %s has no public address yet", lb.ID), 5*time.Second)
}

// degraded: the API reports a problem (not merely a pending address).
func degraded(lb *polycrate.LoadBalancer) bool {
	switch lb.State {
	case "DEGRADED", "DOWN", "CRITICAL":
		return true
	}
	return false
}

// release lets go of a Service the operator no longer manages (annotated
// ignore, or not managed in the opt-in scope): its instance is deleted, the
// address the operator wrote and the cleanup finalizer are removed, and the
// service controller is told that someone else implements it.
func (b balancers) release(ctx context.Context, svc *corev1.Service) error {
	// Without the API the instance cannot be looked up: letting go now could
	// orphan it, so the Service is retried.
	c, err := b.client()
	if err != nil {
		return err
	}
	lb, err := b.lookup(ctx, c, svc)
	if err != nil {
		return err
	}
	updated := svc.DeepCopy()
	if lb != nil {
		if err := b.EnsureLoadBalancerDeleted(ctx, "", svc); err != nil {
			return err
		}
		updated.Status.LoadBalancer = corev1.LoadBalancerStatus{}
	}
	updated.Finalizers = slices.DeleteFunc(updated.Finalizers, func(f string) bool { return f == servicehelper.LoadBalancerCleanupFinalizer })
	if b.Kube != nil && (lb != nil || servicehelper.HasLBFinalizer(svc)) {
		if _, err := servicehelper.PatchService(b.Kube.CoreV1(), svc, updated); err != nil {
			return fmt.Errorf("letting go of the Service: %w", err)
		}
		b.Log.Info("Service no longer managed: let go", "namespace", svc.Namespace, "service", svc.Name)
	}
	return cloudprovider.ImplementedElsewhere
}

// lookup finds the Service's instance: by the remembered id, else by one list of
// the workspace's instances (their labels name the Service; this is also the
// adoption after a crash between create and the status write). A deleted
// instance counts as none.
func (b balancers) lookup(ctx context.Context, c *polycrate.Client, svc *corev1.Service) (*polycrate.LoadBalancer, error) {
	id, ok := b.known(svc.UID)
	if !ok {
		rows, err := c.LoadBalancers().List(ctx, nil)
		if err != nil {
			return nil, fmt.Errorf("listing load balancer instances: %w", err)
		}
		ids := map[types.UID]string{}
		for _, r := range rows {
			if uid, _ := r.Labels[LabelServiceUID].(string); uid != "" && !r.IsDeleted {
				ids[types.UID(uid)] = r.ID
			}
		}
		b.mu.Lock()
		b.ids = ids
		b.mu.Unlock()
		if id, ok = ids[svc.UID]; !ok {
			return nil, nil
		}
	}
	lb, err := c.LoadBalancers().Get(ctx, id)
	switch {
	case polycrate.IsNotFound(err) || (err == nil && lb.IsDeleted):
		b.forget(svc.UID)
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("reading load balancer instance %s: %w", id, err)
	}
	return lb, nil
}

func (p *Provider) known(uid types.UID) (string, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	id, ok := p.ids[uid]
	return id, ok
}

func (p *Provider) remember(uid types.UID, id string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ids == nil {
		p.ids = map[types.UID]string{}
	}
	p.ids[uid] = id
}

func (p *Provider) forget(uid types.UID) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.ids, uid)
}

func (p *Provider) forgetAll() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.ids = nil
}

func statusOf(lb *polycrate.LoadBalancer) *corev1.LoadBalancerStatus {
	addr := lb.Address()
	if addr == "" {
		return &corev1.LoadBalancerStatus{}
	}
	vip := corev1.LoadBalancerIPModeVIP
	return &corev1.LoadBalancerStatus{Ingress: []corev1.LoadBalancerIngress{{IP: addr, IPMode: &vip}}}
}

// Instance is what a Service's load balancer instance should hold.
type Instance struct {
	Ports  []polycrate.LoadBalancerPort
	Config string
	Labels map[string]string
}

// Matches reports whether an instance holds what it should (other labels the API
// may add are not the operator's to judge).
func (want *Instance) Matches(lb *polycrate.LoadBalancer) bool {
	if lb.Config == nil || *lb.Config != want.Config || !slices.Equal(lb.Ports, want.Ports) {
		return false
	}
	for k, v := range want.Labels {
		if got, _ := lb.Labels[k].(string); got != v {
			return false
		}
	}
	return true
}

// Desired is the instance a Service should have: one port per Service port,
// forwarding to the port's NodePort (target_port), and the HAProxy configuration
// with every node's address as a server of each port's backend. Only TCP is
// forwarded; a port without a NodePort cannot be.
func Desired(svc *corev1.Service, nodes []*corev1.Node, clusterID string) (*Instance, error) {
	if len(svc.Spec.Ports) == 0 {
		return nil, errors.New("the Service has no ports")
	}
	want := &Instance{Labels: map[string]string{LabelServiceUID: string(svc.UID), LabelService: svc.Namespace + "/" + svc.Name,
		LabelClusterID: clusterID, LabelManagedBy: managedBy}}
	for _, p := range svc.Spec.Ports {
		proto := p.Protocol
		if proto == "" {
			proto = corev1.ProtocolTCP
		}
		if proto != corev1.ProtocolTCP {
			return nil, fmt.Errorf("port %d/%s: the Polycrate load balancer forwards TCP only; protocol %s is not supported (remove the port or annotate the Service %s=ignore)",
				p.Port, proto, proto, "polycrate.io/loadbalancer")
		}
		if p.NodePort == 0 {
			return nil, fmt.Errorf("port %d has no NodePort: the Polycrate load balancer forwards to NodeIP:NodePort (spec.allocateLoadBalancerNodePorts must not be false)", p.Port)
		}
		name := p.Name
		if name == "" {
			name = fmt.Sprintf("port-%d", p.Port)
		}
		want.Ports = append(want.Ports, polycrate.LoadBalancerPort{Port: p.Port, Name: name, Protocol: string(proto), TargetPort: p.NodePort})
	}
	want.Config = HAProxyConfig(svc, want.Ports, targets(nodes))
	return want, nil
}

// target is one node's address.
type target struct{ name, ip string }

// targets are the nodes' addresses (InternalIP, else ExternalIP), by name.
func targets(nodes []*corev1.Node) []target {
	var out []target
	for _, n := range nodes {
		ip := ""
		for _, t := range []corev1.NodeAddressType{corev1.NodeInternalIP, corev1.NodeExternalIP} {
			for _, a := range n.Status.Addresses {
				if a.Type == t && ip == "" {
					ip = a.Address
				}
			}
		}
		if ip != "" {
			out = append(out, target{n.Name, ip})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out
}

// HAProxyConfig is the instance's configuration: a TCP frontend per port and a
// backend with every node's NodePort. Client-IP session affinity balances by
// source; externalTrafficPolicy Local checks kube-proxy's health check NodePort,
// so that only nodes with a ready endpoint get traffic.
func HAProxyConfig(svc *corev1.Service, ports []polycrate.LoadBalancerPort, nodes []target) string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "# Managed by the Polycrate operator for the Service %s/%s (uid %s): do not edit.\n", svc.Namespace, svc.Name, svc.UID)
	balance := "roundrobin"
	if svc.Spec.SessionAffinity == corev1.ServiceAffinityClientIP {
		balance = "source"
	}
	local := svc.Spec.ExternalTrafficPolicy == corev1.ServiceExternalTrafficPolicyLocal && svc.Spec.HealthCheckNodePort > 0
	for _, p := range ports {
		section := fmt.Sprintf("%s_%s_%d", svc.Namespace, svc.Name, p.Port)
		fmt.Fprintf(&sb, "frontend %s\n  bind :%d\n  mode tcp\n  default_backend %s\n", section, p.Port, section)
		fmt.Fprintf(&sb, "backend %s\n  mode tcp\n  balance %s\n", section, balance)
		if local {
			fmt.Fprintf(&sb, "  option httpchk GET /healthz\n")
		}
		for _, n := range nodes {
			check := "check"
			if local {
				check = fmt.Sprintf("check port %d", svc.Spec.HealthCheckNodePort)
			}
			fmt.Fprintf(&sb, "  server %s %s:%d %s\n", n.name, n.ip, p.TargetPort, check)
		}
	}
	return sb.String()
}
