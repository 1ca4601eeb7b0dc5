// Package cloud is the operator's cloud controller (CCM-lite, seed 002 "Cloud
// Controller"): an implementation of k8s.io/cloud-provider's Interface with
// InstancesV2 (node initialization) and LoadBalancer (Services of type
// LoadBalancer → Polycrate load balancer instances), run by that module's own
// cloud-node and service controllers inside the operator's manager
// (controllers.go) while the OperatorConfig enables them.
package cloud

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	cloudprovider "k8s.io/cloud-provider"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/recorder"

	v1 "github.com/polycrate/polycrate-operator/api/v1alpha1"
	"github.com/polycrate/polycrate-operator/internal/liveconfig"
	"github.com/polycrate/polycrate-operator/internal/polycrate"
)

// ProviderName is the cloud provider's name (the scheme of its providerIDs).
const ProviderName = "polycrate"

// Provider is the cloud: what the upstream controllers call. It reads Hosts and
// the OperatorConfig from the manager's cache and speaks to the API only through
// the typed client.
type Provider struct {
	// Reader reads Hosts and the OperatorConfig (the manager's cache).
	Reader client.Reader
	// Writer writes Host conditions.
	Writer client.Client
	// Kube patches Services the operator lets go of (as the service controller
	// patches them: status subresource).
	Kube      kubernetes.Interface
	Config    *liveconfig.Store
	Conn      *polycrate.Connection
	Namespace string
	Recorder  recorder.EventRecorder
	Log       logr.Logger
	// AddressWait is how long EnsureLoadBalancer waits for a new instance's public
	// address before it hands the Service back for a retry (default 10 s), polling
	// every AddressPoll (default 1 s).
	AddressWait, AddressPoll time.Duration

	mu sync.Mutex
	// ids maps a Service's UID to its load balancer instance; filled from one
	// list of the workspace's instances (instance labels name the Service).
	ids map[types.UID]string
	// nodeReasons is the last reason announced per Node (events on change only).
	nodeReasons map[string]string
}

var (
	_ cloudprovider.Interface    = (*Provider)(nil)
	_ cloudprovider.InstancesV2  = instances{}
	_ cloudprovider.LoadBalancer = balancers{}
)

// Initialize is a no-op: the Provider is built with what it needs.
func (*Provider) Initialize(cloudprovider.ControllerClientBuilder, <-chan struct{}) {}

// LoadBalancer is the load balancer implementation.
func (p *Provider) LoadBalancer() (cloudprovider.LoadBalancer, bool) { return balancers{p}, true }

// Instances is not implemented (InstancesV2 is).
func (*Provider) Instances() (cloudprovider.Instances, bool) { return nil, false }

// InstancesV2 is the node initialization.
func (p *Provider) InstancesV2() (cloudprovider.InstancesV2, bool) { return instances{p}, true }

// Zones is not implemented (InstancesV2 gives the region).
func (*Provider) Zones() (cloudprovider.Zones, bool) { return nil, false }

// Clusters is not implemented.
func (*Provider) Clusters() (cloudprovider.Clusters, bool) { return nil, false }

// Routes is not implemented (the cluster's CNI routes).
func (*Provider) Routes() (cloudprovider.Routes, bool) { return nil, false }

// ProviderName is "polycrate".
func (*Provider) ProviderName() string { return ProviderName }

// HasClusterID is true: the local cluster's API id is part of every providerID.
func (*Provider) HasClusterID() bool { return true }

// ProviderID is the providerID the operator gives a Node.
func ProviderID(clusterID, node string) string {
	return v1.ProviderIDPrefix + clusterID + "/" + node
}

// operatorConfig reads the OperatorConfig (its status holds the agent's PoP and
// the workspace).
func (p *Provider) operatorConfig(ctx context.Context) (*v1.OperatorConfig, error) {
	oc := &v1.OperatorConfig{}
	if err := p.Reader.Get(ctx, types.NamespacedName{Namespace: p.Namespace, Name: v1.DefaultOperatorConfigName}, oc); err != nil {
		return nil, fmt.Errorf("reading the OperatorConfig: %w", err)
	}
	return oc, nil
}

// lbSettings is the load balancer part of the live configuration.
type lbSettings struct {
	enabled bool
	optIn   bool
}

func settingsOf(snap *liveconfig.Snapshot) (nodes bool, lb lbSettings) {
	if snap == nil || !snap.Spec.CloudController.Enabled {
		return false, lbSettings{}
	}
	c := snap.Spec.CloudController.LoadBalancer
	return true, lbSettings{enabled: liveconfig.Enabled(c.Enabled), optIn: c.ServiceScope == "opt-in"}
}

// Manages reports whether the operator manages a Service's load balancer under
// the current configuration: type LoadBalancer without a loadBalancerClass, and
// service_scope all (unless annotated polycrate.io/loadbalancer=ignore) or opt-in
// (only when annotated polycrate.io/loadbalancer=managed).
func (p *Provider) Manages(svc *corev1.Service) bool {
	_, lb := settingsOf(p.Config.Get())
	if !lb.enabled || svc.Spec.Type != corev1.ServiceTypeLoadBalancer || svc.Spec.LoadBalancerClass != nil {
		return false
	}
	a := strings.TrimSpace(svc.Annotations[v1.AnnotationLoadBalancer])
	if lb.optIn {
		return a == "managed"
	}
	return a != "ignore"
}

// client is the API client, or why there is none.
func (p *Provider) client() (*polycrate.Client, error) {
	c := p.Conn.Client()
	if c == nil {
		return nil, polycrate.ErrNotConnected
	}
	return c, nil
}

func (p *Provider) addressWait() (wait, poll time.Duration) {
	wait, poll = p.AddressWait, p.AddressPoll
	if wait <= 0 {
		wait = 10 * time.Second
	}
	if poll <= 0 {
		poll = time.Second
	}
	return wait, poll
}
