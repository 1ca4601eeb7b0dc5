package cloud

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	cloudprovider "k8s.io/cloud-provider"
	cloudproviderapi "k8s.io/cloud-provider/api"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/polycrate/polycrate-operator/api/v1alpha1"
	"github.com/polycrate/polycrate-operator/internal/controller"
)

// instances is InstancesV2: the cloud-node controller asks it for a tainted
// Node's metadata and initializes the Node with the answer (providerID, region
// label, taint removed); an error keeps the taint and the Node is retried with
// the controller's backoff (and at once when its Host or the OperatorConfig
// changes, see controllers.go).
type instances struct{ *Provider }

// InstanceExists: the operator never deletes Nodes (the cloud-node-lifecycle
// controller, the only caller, is not run); a Node exists.
func (instances) InstanceExists(context.Context, *corev1.Node) (bool, error) { return true, nil }

// InstanceShutdown: the API does not say; never shut down.
func (instances) InstanceShutdown(context.Context, *corev1.Node) (bool, error) { return false, nil }

// InstanceMetadata is the seed's rule: after the Node's Host has synced to the
// API, providerID polycrate://<clusterID>/<node> and region = the agent's
// pop_name. An initialized Node only gets its addresses back (the controller's
// periodic address update). A providerID someone else set is never overwritten:
// the Node keeps its taint, its Host gets a condition and the Node an event.
func (i instances) InstanceMetadata(ctx context.Context, node *corev1.Node) (*cloudprovider.InstanceMetadata, error) {
	addrs := nodeAddresses(node)
	if !Tainted(node) {
		return &cloudprovider.InstanceMetadata{ProviderID: node.Spec.ProviderID, NodeAddresses: addrs}, nil
	}
	md, reason, err := i.initialization(ctx, node)
	if err != nil {
		i.announce(ctx, node, reason, err.Error())
		return nil, err
	}
	md.NodeAddresses = addrs
	return md, nil
}

// initialization decides a tainted Node's metadata, or why it waits.
func (i instances) initialization(ctx context.Context, node *corev1.Node) (*cloudprovider.InstanceMetadata, string, error) {
	snap := i.Config.Get()
	if snap == nil || snap.LocalClusterID == "" {
		return nil, v1.ReasonWaitingForLocalCluster, errors.New("waiting for the local cluster to be registered with the Polycrate API (its id is part of the providerID); the Node keeps its taint")
	}
	want := ProviderID(snap.LocalClusterID, node.Name)
	if node.Spec.ProviderID != "" && node.Spec.ProviderID != want {
		return nil, v1.ReasonForeignProviderID, fmt.Errorf("the Node's providerID %q was set by another provider (the operator's would be %q): "+
			"the operator leaves the Node alone; run one cloud controller per cluster", node.Spec.ProviderID, want)
	}
	oc, err := i.operatorConfig(ctx)
	if err != nil {
		return nil, v1.ReasonOperatorConfigMissing, err
	}
	pop := ""
	if oc.Status.Agent != nil {
		pop = oc.Status.Agent.PopName
	}
	if pop == "" {
		return nil, v1.ReasonWaitingForPop, errors.New("the agent has no pop_name yet (OperatorConfig status.agent.pop_name; the health report's answer): " +
			"the Node keeps its taint until the region is known")
	}
	host := &v1.Host{}
	if err := i.Reader.Get(ctx, types.NamespacedName{Name: node.Name}, host); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, v1.ReasonWaitingForHostSync, fmt.Errorf("waiting for the Host %s to sync to the Polycrate API (it is discovered from the Node while node_discovery is enabled); the Node keeps its taint", node.Name)
		}
		return nil, v1.ReasonWaitingForHostSync, err
	}
	if host.Status.APIID == "" {
		msg := fmt.Sprintf("waiting for the Host %s to sync to the Polycrate API; the Node keeps its taint", node.Name)
		if host.Status.Message != "" {
			msg += " (Host: " + host.Status.Message + ")"
		}
		return nil, v1.ReasonWaitingForHostSync, errors.New(msg)
	}
	return &cloudprovider.InstanceMetadata{ProviderID: want, Region: pop}, "", nil
}

// announce tells why a Node waits: a Warning event on the Node when the reason
// changes (a retry that changes nothing says nothing) and the Host's
// NodeInitialized condition.
func (i instances) announce(ctx context.Context, node *corev1.Node, reason, msg string) {
	i.mu.Lock()
	if i.nodeReasons == nil {
		i.nodeReasons = map[string]string{}
	}
	changed := i.nodeReasons[node.Name] != reason
	i.nodeReasons[node.Name] = reason
	i.mu.Unlock()
	if changed {
		i.Log.Info("node not initialized", "node", node.Name, "reason", reason, "message", msg)
		controller.Events{Recorder: i.Recorder, Action: "InitializeNode", Log: i.Log}.Event(node, corev1.EventTypeWarning, reason, msg)
	}
	i.setHostCondition(ctx, node.Name, metav1.ConditionFalse, reason, msg)
}

// Initialized records on the Host that its Node was initialized (called for
// every Node event; writes only on change).
func (p *Provider) Initialized(ctx context.Context, node *corev1.Node) {
	snap := p.Config.Get()
	if snap == nil || snap.LocalClusterID == "" || Tainted(node) || node.Spec.ProviderID != ProviderID(snap.LocalClusterID, node.Name) {
		return
	}
	p.mu.Lock()
	delete(p.nodeReasons, node.Name)
	p.mu.Unlock()
	p.setHostCondition(ctx, node.Name, metav1.ConditionTrue, v1.ReasonNodeInitialized,
		fmt.Sprintf("providerID %s, region %s", node.Spec.ProviderID, node.Labels[corev1.LabelTopologyRegion]))
}

// setHostCondition writes the Host's NodeInitialized condition when it differs,
// with an optimistic lock: the sync controller writes the same status.
func (p *Provider) setHostCondition(ctx context.Context, name string, status metav1.ConditionStatus, reason, msg string) {
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		host := &v1.Host{}
		if err := p.Reader.Get(ctx, types.NamespacedName{Name: name}, host); err != nil {
			return client.IgnoreNotFound(err)
		}
		before := host.DeepCopy()
		cond := metav1.Condition{Type: v1.ConditionNodeInitialized, Status: status, Reason: reason, Message: msg, ObservedGeneration: host.Generation}
		if c := findCondition(host.Status.Conditions, cond.Type); c != nil && c.Status == status && c.Reason == reason && c.Message == msg {
			return nil
		}
		controller.SetCondition(&host.Status.Conditions, cond)
		return client.IgnoreNotFound(p.Writer.Status().Patch(ctx, host, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})))
	})
	if err != nil {
		p.Log.Info("cannot write the NodeInitialized condition of a Host", "host", name, "error", err.Error())
	}
}

func findCondition(conds []metav1.Condition, typ string) *metav1.Condition {
	for i := range conds {
		if conds[i].Type == typ {
			return &conds[i]
		}
	}
	return nil
}

// Tainted reports whether a Node still waits for its cloud controller.
func Tainted(node *corev1.Node) bool {
	for _, t := range node.Spec.Taints {
		if t.Key == cloudproviderapi.TaintExternalCloudProvider {
			return true
		}
	}
	return false
}

// nodeAddresses are the addresses the Node has (the kubelet's, or those the
// kubelet was given with --node-ip, annotated on the Node), plus its hostname:
// the Polycrate API knows no more about a machine than the Node does.
func nodeAddresses(node *corev1.Node) []corev1.NodeAddress {
	if len(node.Status.Addresses) > 0 {
		return append([]corev1.NodeAddress(nil), node.Status.Addresses...)
	}
	var out []corev1.NodeAddress
	for _, ip := range strings.Split(node.Annotations[cloudproviderapi.AnnotationAlphaProvidedIPAddr], ",") {
		if ip = strings.TrimSpace(ip); net.ParseIP(ip) != nil {
			out = append(out, corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: ip})
		}
	}
	if len(out) > 0 {
		out = append(out, corev1.NodeAddress{Type: corev1.NodeHostName, Address: node.Name})
	}
	return out
}
