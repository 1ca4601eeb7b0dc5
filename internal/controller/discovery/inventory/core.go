package inventory

import (
	"net"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"

	v1 "github.com/polycrate/polycrate-operator/api/v1alpha1"
	"github.com/polycrate/polycrate-operator/internal/liveconfig"
)

// +kubebuilder:rbac:groups="",resources=nodes,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=persistentvolumes,verbs=get;list;watch

// Hosts maps Nodes to Hosts (seed 002 "Host Discovery"); onError hears of an
// invalid node_discovery.label_selector once per selector.
func Hosts(onError func(msg string)) *Mirror[*corev1.Node] {
	h := &hostSelector{onError: onError}
	return &Mirror[*corev1.Node]{Name: "host", Source: corev1.SchemeGroupVersion.WithKind("Node"), Target: &v1.Host{},
		Enabled: nodeDiscovery, TargetKey: clusterScoped, Declare: h.declare}
}

// nodeDiscovery: Hosts and, with them, volumes follow node discovery (the
// cluster's inventory switch).
func nodeDiscovery(s *liveconfig.Snapshot) bool {
	return liveconfig.Enabled(s.Spec.NodeDiscovery.Enabled)
}

// clusterScoped: the CR has the (cluster-scoped) source's name.
func clusterScoped(src types.NamespacedName) types.NamespacedName {
	return types.NamespacedName{Name: src.Name}
}

type hostSelector struct {
	mu      sync.Mutex
	badSel  string
	onError func(msg string)
}

// declare applies node_discovery.label_selector and maps the seed's field table.
func (m *hostSelector) declare(n *corev1.Node, snap *liveconfig.Snapshot, _ time.Time) (*Declared, bool, error) {
	if sel := snap.Spec.NodeDiscovery.LabelSelector; sel != "" {
		s, err := labels.Parse(sel)
		if err != nil {
			m.mu.Lock()
			if m.badSel != sel && m.onError != nil {
				m.onError("node_discovery.label_selector " + sel + " is invalid, no Node is mirrored: " + err.Error())
			}
			m.badSel = sel
			m.mu.Unlock()
			return nil, false, nil
		}
		if !s.Matches(labels.Set(n.Labels)) {
			return nil, false, nil
		}
	}
	return &Declared{Labels: labelIfValid(v1.LabelHostSourceNode, n.Name), Spec: HostSpecOf(n)}, true, nil
}

// HostSpecOf is the seed's table: name and hostname from the Node's name, the
// ExternalIP (falling back to the InternalIP) as default_ipv4, CPU cores and
// memory in MB (2^20 bytes) from the capacity, the architecture and providerID.
func HostSpecOf(n *corev1.Node) v1.HostSpec {
	s := v1.HostSpec{Name: n.Name, Hostname: n.Name, ResourceCPUArchitecture: n.Status.NodeInfo.Architecture,
		ProviderID: n.Spec.ProviderID, DefaultIPv4: nodeIPv4(n),
		Source: &v1.SourceReference{APIVersion: "v1", Kind: "Node", Name: n.Name, UID: string(n.UID)}}
	if q, ok := n.Status.Capacity[corev1.ResourceCPU]; ok {
		s.ResourceCPUCores = q.Value() // whole cores, rounded up
	}
	if q, ok := n.Status.Capacity[corev1.ResourceMemory]; ok {
		s.ResourceMemory = q.Value() / (1 << 20)
	}
	return s
}

func nodeIPv4(n *corev1.Node) string {
	for _, t := range []corev1.NodeAddressType{corev1.NodeExternalIP, corev1.NodeInternalIP} {
		for _, a := range n.Status.Addresses {
			if a.Type == t {
				if ip := net.ParseIP(a.Address); ip != nil && ip.To4() != nil {
					return a.Address
				}
			}
		}
	}
	return ""
}

// Volumes maps every PersistentVolume to a K8sVolume of its name (docs/inventory.md).
var Volumes = &Mirror[*corev1.PersistentVolume]{Name: "k8svolume", Source: corev1.SchemeGroupVersion.WithKind("PersistentVolume"),
	Target: &v1.K8sVolume{}, Enabled: nodeDiscovery, TargetKey: clusterScoped,
	Declare: func(pv *corev1.PersistentVolume, _ *liveconfig.Snapshot, _ time.Time) (*Declared, bool, error) {
		return &Declared{Labels: labelIfValid(v1.LabelVolumeSourcePV, pv.Name), Spec: VolumeSpecOf(pv)}, true, nil
	}}

// VolumeSpecOf maps what a platform engineer wants to see of a volume.
func VolumeSpecOf(pv *corev1.PersistentVolume) v1.K8sVolumeSpec {
	s := v1.K8sVolumeSpec{Name: pv.Name, ProviderObjectID: string(pv.UID), StorageClass: pv.Spec.StorageClassName,
		Phase: string(pv.Status.Phase), ReclaimPolicy: string(pv.Spec.PersistentVolumeReclaimPolicy), VolumeMode: "Filesystem",
		Source: &v1.SourceReference{APIVersion: "v1", Kind: "PersistentVolume", Name: pv.Name, UID: string(pv.UID)}}
	if s.Phase == "" {
		s.Phase = "Unknown"
	}
	if pv.Spec.VolumeMode != nil {
		s.VolumeMode = string(*pv.Spec.VolumeMode)
	}
	if q, ok := pv.Spec.Capacity[corev1.ResourceStorage]; ok {
		s.CapacityBytes, s.CapacityString = q.Value(), q.String()
	}
	for _, m := range pv.Spec.AccessModes {
		s.AccessModes = append(s.AccessModes, string(m))
	}
	if c := pv.Spec.ClaimRef; c != nil {
		s.PVCNamespace, s.PVCName = c.Namespace, c.Name
	}
	if csi := pv.Spec.CSI; csi != nil {
		s.CSIDriver, s.CloudProviderVolumeID = csi.Driver, csi.VolumeHandle
	}
	return s
}

// labelIfValid sets a source label when the value is a valid label value (names
// can be longer than 63 characters; the source annotation always names it).
func labelIfValid(key, value string) map[string]string {
	if len(validation.IsValidLabelValue(value)) == 0 {
		return map[string]string{key: value}
	}
	return nil
}
