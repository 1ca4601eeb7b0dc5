package cloud

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	v1 "github.com/polycrate/polycrate-operator/api/v1alpha1"
	"github.com/polycrate/polycrate-operator/internal/liveconfig"
	"github.com/polycrate/polycrate-operator/internal/polycrate"
)

func node(name string, addrs ...corev1.NodeAddress) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: corev1.NodeStatus{Addresses: addrs}}
}

func service(mod func(*corev1.Service)) *corev1.Service {
	s := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web", UID: "u-1"},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer,
			Ports: []corev1.ServicePort{{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP, NodePort: 30080}}}}
	if mod != nil {
		mod(s)
	}
	return s
}

func TestDesired(t *testing.T) {
	nodes := []*corev1.Node{
		node("b", corev1.NodeAddress{Type: corev1.NodeExternalIP, Address: "203.0.113.2"}),
		node("a", corev1.NodeAddress{Type: corev1.NodeExternalIP, Address: "203.0.113.1"}, corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: "10.0.0.1"}),
		node("no-address"),
	}
	for _, tc := range []struct {
		name    string
		svc     *corev1.Service
		ports   []polycrate.LoadBalancerPort
		config  []string // lines the configuration holds
		without []string
		err     string
	}{
		{name: "one TCP port: every node with an address, InternalIP first, by name",
			svc:     service(nil),
			ports:   []polycrate.LoadBalancerPort{{Port: 80, Name: "http", Protocol: "TCP", TargetPort: 30080}},
			config:  []string{"frontend shop_web_80", "  bind :80", "  balance roundrobin", "  server a 10.0.0.1:30080 check", "  server b 203.0.113.2:30080 check"},
			without: []string{"no-address", "httpchk"}},
		{name: "unnamed ports get port-N; protocol defaults to TCP",
			svc: service(func(s *corev1.Service) {
				s.Spec.Ports = []corev1.ServicePort{{Port: 443, NodePort: 30443}, {Port: 8443, NodePort: 31443, Protocol: corev1.ProtocolTCP}}
			}),
			ports: []polycrate.LoadBalancerPort{{Port: 443, Name: "port-443", Protocol: "TCP", TargetPort: 30443},
				{Port: 8443, Name: "port-8443", Protocol: "TCP", TargetPort: 31443}},
			config: []string{"frontend shop_web_443", "frontend shop_web_8443", "  server a 10.0.0.1:31443 check"}},
		{name: "client-IP affinity balances by source",
			svc:    service(func(s *corev1.Service) { s.Spec.SessionAffinity = corev1.ServiceAffinityClientIP }),
			ports:  []polycrate.LoadBalancerPort{{Port: 80, Name: "http", Protocol: "TCP", TargetPort: 30080}},
			config: []string{"  balance source"}},
		{name: "externalTrafficPolicy Local checks kube-proxy's health check port",
			svc: service(func(s *corev1.Service) {
				s.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
				s.Spec.HealthCheckNodePort = 32000
			}),
			ports:  []polycrate.LoadBalancerPort{{Port: 80, Name: "http", Protocol: "TCP", TargetPort: 30080}},
			config: []string{"  option httpchk GET /healthz", "  server a 10.0.0.1:30080 check port 32000"}},
		{name: "UDP is refused", err: "TCP only",
			svc: service(func(s *corev1.Service) { s.Spec.Ports[0].Protocol = corev1.ProtocolUDP })},
		{name: "SCTP is refused", err: "protocol SCTP is not supported",
			svc: service(func(s *corev1.Service) { s.Spec.Ports[0].Protocol = corev1.ProtocolSCTP })},
		{name: "no NodePort", err: "allocateLoadBalancerNodePorts",
			svc: service(func(s *corev1.Service) { s.Spec.Ports[0].NodePort = 0 })},
		{name: "no ports", err: "no ports",
			svc: service(func(s *corev1.Service) { s.Spec.Ports = nil })},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Desired(tc.svc, nodes, "c-1")
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want one saying %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(got.Ports) != len(tc.ports) {
				t.Fatalf("ports %+v, want %+v", got.Ports, tc.ports)
			}
			for i := range tc.ports {
				if got.Ports[i] != tc.ports[i] {
					t.Fatalf("ports %+v, want %+v", got.Ports, tc.ports)
				}
			}
			lines := strings.Split(got.Config, "\n")
			for _, want := range tc.config {
				if !contains(lines, want) {
					t.Errorf("configuration lacks %q:\n%s", want, got.Config)
				}
			}
			for _, not := range tc.without {
				if strings.Contains(got.Config, not) {
					t.Errorf("configuration has %q:\n%s", not, got.Config)
				}
			}
			if got.Labels[LabelServiceUID] != "u-1" || got.Labels[LabelService] != "shop/web" || got.Labels[LabelClusterID] != "c-1" {
				t.Errorf("labels %v", got.Labels)
			}
			// The same input gives the same configuration: an unchanged Service
			// never rewrites its instance.
			again, _ := Desired(tc.svc, []*corev1.Node{nodes[2], nodes[1], nodes[0]}, "c-1")
			if again.Config != got.Config {
				t.Errorf("the configuration depends on the node order")
			}
		})
	}
}

func contains(lines []string, s string) bool {
	for _, l := range lines {
		if l == s {
			return true
		}
	}
	return false
}

func TestMatches(t *testing.T) {
	want, err := Desired(service(nil), []*corev1.Node{node("a", corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: "10.0.0.1"})}, "c-1")
	if err != nil {
		t.Fatal(err)
	}
	labels := map[string]any{"team": "shop"} // the API's or a person's own label
	for k, v := range want.Labels {
		labels[k] = v
	}
	lb := &polycrate.LoadBalancer{Meta: polycrate.Meta{Labels: labels}, Ports: want.Ports, Config: ptr.To(want.Config)}
	if !want.Matches(lb) {
		t.Fatal("an instance holding what it should does not match")
	}
	for name, change := range map[string]func(*polycrate.LoadBalancer){
		"config":    func(l *polycrate.LoadBalancer) { l.Config = ptr.To(want.Config + "# edited\n") },
		"no config": func(l *polycrate.LoadBalancer) { l.Config = nil },
		"port": func(l *polycrate.LoadBalancer) {
			l.Ports = []polycrate.LoadBalancerPort{{Port: 81, Name: "http", Protocol: "TCP", TargetPort: 30080}}
		},
		"our label":  func(l *polycrate.LoadBalancer) { l.Labels = map[string]any{"team": "shop"} },
		"label kind": func(l *polycrate.LoadBalancer) { l.Labels = map[string]any{LabelServiceUID: 1} },
	} {
		c := *lb
		change(&c)
		if want.Matches(&c) {
			t.Errorf("%s: a differing instance matches", name)
		}
	}
}

func TestManages(t *testing.T) {
	store := &liveconfig.Store{}
	p := &Provider{Config: store}
	set := func(enabled, lb bool, scope string) {
		snap := &liveconfig.Snapshot{}
		snap.Spec.CloudController = v1.CloudControllerConfig{Enabled: enabled,
			LoadBalancer: v1.LoadBalancerConfig{Enabled: ptr.To(lb), ServiceScope: scope}}
		store.Set(snap)
	}
	annotated := func(v string) func(*corev1.Service) {
		return func(s *corev1.Service) { s.Annotations = map[string]string{v1.AnnotationLoadBalancer: v} }
	}
	for _, tc := range []struct {
		name        string
		enabled, lb bool
		scope       string
		svc         *corev1.Service
		want        bool
	}{
		{"all: plain", true, true, "all", service(nil), true},
		{"all: ignore", true, true, "all", service(annotated("ignore")), false},
		{"all: managed", true, true, "all", service(annotated("managed")), true},
		{"opt-in: plain", true, true, "opt-in", service(nil), false},
		{"opt-in: managed", true, true, "opt-in", service(annotated("managed")), true},
		{"opt-in: ignore", true, true, "opt-in", service(annotated("ignore")), false},
		{"another class", true, true, "all", service(func(s *corev1.Service) { s.Spec.LoadBalancerClass = ptr.To("example.com/lb") }), false},
		{"not a LoadBalancer", true, true, "all", service(func(s *corev1.Service) { s.Spec.Type = corev1.ServiceTypeNodePort }), false},
		{"load balancers off", true, false, "all", service(nil), false},
		{"cloud controller off", false, true, "all", service(nil), false},
	} {
		set(tc.enabled, tc.lb, tc.scope)
		if got := p.Manages(tc.svc); got != tc.want {
			t.Errorf("%s: Manages = %v, want %v", tc.name, got, tc.want)
		}
	}
	store.Set(nil)
	if p.Manages(service(nil)) {
		t.Error("no OperatorConfig: nothing is managed")
	}
}

func TestNodeAddresses(t *testing.T) {
	kubelet := node("a", corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: "10.0.0.1"})
	if got := nodeAddresses(kubelet); len(got) != 1 || got[0].Address != "10.0.0.1" {
		t.Fatalf("the kubelet's addresses: %v", got)
	}
	given := node("b")
	given.Annotations = map[string]string{"alpha.kubernetes.io/provided-node-ip": "10.0.0.2, fd00::2,bogus"}
	got := nodeAddresses(given)
	if len(got) != 3 || got[0].Address != "10.0.0.2" || got[1].Address != "fd00::2" || got[2] != (corev1.NodeAddress{Type: corev1.NodeHostName, Address: "b"}) {
		t.Fatalf("--node-ip addresses: %v", got)
	}
	if got := nodeAddresses(node("c")); len(got) != 0 {
		t.Fatalf("nothing known: %v", got)
	}
}
