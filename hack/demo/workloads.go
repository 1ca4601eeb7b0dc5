package main

import (
	"context"
	"fmt"
	"time"

	certmanagerv1 "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"
	cmmeta "github.com/cert-manager/cert-manager/pkg/apis/meta/v1"
	velerov1 "github.com/vmware-tanzu/velero/pkg/apis/velero/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	v1 "github.com/polycrate/polycrate-operator/api/v1alpha1"
)

// The demo's workloads exercise every landed feature. The local control plane
// runs no controllers and no kubelet, so the demo plays their part through the
// small simulator below: it creates Pods with their Deployment/ReplicaSet owners
// and writes the status a kubelet, cert-manager or Velero would write (Pod
// readiness, certificate and backup status, Node capacity). What the API then
// shows is what the operator really derived from those objects.

// applyWorkloads creates the demo objects.
func applyWorkloads(ctx context.Context, c client.Client) error {
	steps := []struct {
		what string
		do   func(context.Context, client.Client) error
	}{
		{"namespaces shop, ingress-nginx, velero", namespaces},
		{"Ingress multi-service-platform (the seed's Beispiel 9) claiming K8sApp shop", ingressBeispiel9},
		{"Gateway and HTTPRoute acme-shop (bring-your-own-app)", httpRoute},
		{"Deployment shop with two Pods annotated polycrate_k8sapp_name=shop", shopPods},
		{"meta-Secret nginx-ingress.poly and its controller Pods", metaSecretApp},
		{"Nodes worker-1, worker-2 and a PersistentVolume", nodesAndVolumes},
		{"Velero Backup and Schedule, cert-manager Certificate", backupsAndCertificates},
		{"S3Bucket shop-assets", s3Bucket},
		{"Node worker-3 registered by a kubelet with --cloud-provider=external (tainted), Service shop-lb of type LoadBalancer", cloudWorkloads},
		{fmt.Sprintf("Endpoints status-ok and status-down checking the local status server on port %d (/healthz, /down)", statusPort), localTargets},
	}
	for _, s := range steps {
		fmt.Println("  · " + s.what)
		if err := s.do(ctx, c); err != nil {
			return fmt.Errorf("%s: %w", s.what, err)
		}
	}
	return nil
}

func namespaces(ctx context.Context, c client.Client) error {
	for _, ns := range []string{"shop", "ingress-nginx", "velero"} {
		if err := ensure(ctx, c, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			return err
		}
	}
	return nil
}

func ingressBeispiel9(ctx context.Context, c client.Client) error {
	prefix := networkingv1.PathTypePrefix
	ing := &networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "multi-service-platform", Annotations: map[string]string{
		"polycrate_endpoint_monitor": "true", "polycrate_endpoint_path": "/health", "polycrate_endpoint_expected_status": "200",
		"polycrate_k8sapp_name": "shop",
		"polycrate_endpoint_host_config": `{"api.example.com": {"path": "/api/health", "expected_status": [200]},
  "events.example.com": {"path": "/health", "expected_status": [202]},
  "data.example.com": {"path": "/readyz", "expected_status": [200], "timeout": 10}}`}},
		Spec: networkingv1.IngressSpec{IngressClassName: ptr("nginx")}}
	for _, h := range []string{"api.example.com", "events.example.com", "data.example.com", "booking.example.com"} {
		ing.Spec.Rules = append(ing.Spec.Rules, networkingv1.IngressRule{Host: h, IngressRuleValue: networkingv1.IngressRuleValue{
			HTTP: &networkingv1.HTTPIngressRuleValue{Paths: []networkingv1.HTTPIngressPath{{Path: "/", PathType: &prefix,
				Backend: networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{Name: "shop", Port: networkingv1.ServiceBackendPort{Number: 80}}}}}}}})
	}
	return ensure(ctx, c, ing)
}

func httpRoute(ctx context.Context, c client.Client) error {
	gw := &gatewayv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "public"},
		Spec: gatewayv1.GatewaySpec{GatewayClassName: "envoy", Listeners: []gatewayv1.Listener{
			{Name: "https", Protocol: gatewayv1.HTTPSProtocolType, Port: 443}}}}
	if err := ensure(ctx, c, gw); err != nil {
		return err
	}
	return ensure(ctx, c, &gatewayv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "acme-shop", Annotations: map[string]string{
		"polycrate_endpoint_monitor": "true", "polycrate_k8sapp_name": "acme-shop", "polycrate_k8sapp_byoa": "true"}},
		Spec: gatewayv1.HTTPRouteSpec{CommonRouteSpec: gatewayv1.CommonRouteSpec{ParentRefs: []gatewayv1.ParentReference{{Name: "public"}}},
			Hostnames: []gatewayv1.Hostname{"shop.acme.example"}}})
}

func shopPods(ctx context.Context, c client.Client) error {
	return deployment(ctx, c, "shop", "shop", "registry.example.com/acme/shop:2.4.1", 2, map[string]string{"polycrate_k8sapp_name": "shop"})
}

func metaSecretApp(ctx context.Context, c client.Client) error {
	doc := `block:
  name: nginx-ingress
  display_name: NGINX Ingress Controller
  kind: helm
  version: 1.2.0
  app_version: 1.9.6
  from: cargo.ayedo.cloud/ayedo/k8s/nginx-ingress
  type: ingress-controller
  flavor: nginx
  chart: {name: ingress-nginx, version: 4.9.0, repo_url: "https://kubernetes.github.io/ingress-nginx"}
workspace: {name: production, organization: acme-corp}
action: {name: install, status: success, last_executed_at: "2025-12-20T10:00:00Z"}
`
	if err := ensure(ctx, c, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ingress-nginx", Name: "nginx-ingress.poly"},
		StringData: map[string]string{"block.poly": doc}}); err != nil {
		return err
	}
	return deployment(ctx, c, "ingress-nginx", "ingress-nginx-controller", "cargo.ayedo.cloud/library/nginx:1.25.3", 3, nil)
}

// deployment is the simulator's Deployment controller and kubelet: a Deployment,
// its ReplicaSet and ready Pods.
func deployment(ctx context.Context, c client.Client, ns, name, image string, replicas int, podAnnotations map[string]string) error {
	labels := map[string]string{"app": name}
	tmpl := corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels, Annotations: podAnnotations},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: name, Image: image}}}}
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: appsv1.DeploymentSpec{Replicas: ptr(int32(replicas)), Selector: &metav1.LabelSelector{MatchLabels: labels}, Template: tmpl}}
	if err := ensure(ctx, c, d); err != nil {
		return err
	}
	if err := c.Get(ctx, client.ObjectKeyFromObject(d), d); err != nil {
		return err
	}
	const hash = "7d9f8c6b5"
	rs := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name + "-" + hash, Labels: map[string]string{"pod-template-hash": hash},
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "Deployment", Name: d.Name, UID: d.UID, Controller: ptr(true)}}},
		Spec: appsv1.ReplicaSetSpec{Selector: &metav1.LabelSelector{MatchLabels: labels}, Template: tmpl}}
	if err := ensure(ctx, c, rs); err != nil {
		return err
	}
	if err := c.Get(ctx, client.ObjectKeyFromObject(rs), rs); err != nil {
		return err
	}
	for i := 0; i < replicas; i++ {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("%s-%s-%d", name, hash, i),
			Labels: map[string]string{"app": name, "pod-template-hash": hash}, Annotations: podAnnotations,
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: rs.Name, UID: rs.UID, Controller: ptr(true)}}},
			Spec: tmpl.Spec}
		if err := ensure(ctx, c, p); err != nil {
			return err
		}
		if err := c.Get(ctx, client.ObjectKeyFromObject(p), p); err != nil {
			return err
		}
		p.Status.Phase = corev1.PodRunning
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: name, Image: image, Ready: true}}
		if err := c.Status().Update(ctx, p); err != nil {
			return err
		}
	}
	return nil
}

func nodesAndVolumes(ctx context.Context, c client.Client) error {
	for i, ip := range []string{"203.0.113.11", "203.0.113.12"} {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("worker-%d", i+1)},
			Spec: corev1.NodeSpec{ProviderID: fmt.Sprintf("hcloud://%d", 4711+i)}}
		if err := ensure(ctx, c, n); err != nil {
			return err
		}
		if err := c.Get(ctx, client.ObjectKeyFromObject(n), n); err != nil {
			return err
		}
		n.Status.Capacity = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("8"), corev1.ResourceMemory: resource.MustParse("32Gi")}
		n.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeExternalIP, Address: ip}, {Type: corev1.NodeInternalIP, Address: fmt.Sprintf("10.0.0.%d", 11+i)}}
		n.Status.NodeInfo.Architecture = "amd64"
		if err := c.Status().Update(ctx, n); err != nil {
			return err
		}
	}
	fs := corev1.PersistentVolumeFilesystem
	pv := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pvc-shop-data"},
		Spec: corev1.PersistentVolumeSpec{Capacity: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("20Gi")},
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}, StorageClassName: "hcloud-volumes",
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain, VolumeMode: &fs,
			ClaimRef:               &corev1.ObjectReference{Namespace: "shop", Name: "data-shop-0"},
			PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{Driver: "csi.hetzner.cloud", VolumeHandle: "100200300"}}}}
	if err := ensure(ctx, c, pv); err != nil {
		return err
	}
	if err := c.Get(ctx, client.ObjectKeyFromObject(pv), pv); err != nil {
		return err
	}
	pv.Status.Phase = corev1.VolumeBound // the PV controller's part
	return c.Status().Update(ctx, pv)
}

// backupsAndCertificates plays Velero and cert-manager: the objects with the
// status those controllers would write (Velero's CRDs have no status subresource).
func backupsAndCertificates(ctx context.Context, c client.Client) error {
	start := metav1.NewTime(time.Now().Add(-2 * time.Hour).UTC().Truncate(time.Second))
	done := metav1.NewTime(start.Add(4 * time.Minute))
	if err := ensure(ctx, c, &velerov1.Schedule{ObjectMeta: metav1.ObjectMeta{Namespace: "velero", Name: "nightly"},
		Spec:   velerov1.ScheduleSpec{Schedule: "0 2 * * *", Template: velerov1.BackupSpec{TTL: metav1.Duration{Duration: 720 * time.Hour}}},
		Status: velerov1.ScheduleStatus{Phase: velerov1.SchedulePhaseEnabled, LastBackup: &start}}); err != nil {
		return err
	}
	if err := ensure(ctx, c, &velerov1.Backup{ObjectMeta: metav1.ObjectMeta{Namespace: "velero", Name: "nightly-" + start.Format("20060102150405"),
		Labels: map[string]string{velerov1.ScheduleNameLabel: "nightly"}},
		Spec: velerov1.BackupSpec{TTL: metav1.Duration{Duration: 720 * time.Hour}},
		Status: velerov1.BackupStatus{Phase: velerov1.BackupPhaseCompleted, StartTimestamp: &start, CompletionTimestamp: &done,
			Progress: &velerov1.BackupProgress{ItemsBackedUp: 412, TotalItems: 412}}}); err != nil {
		return err
	}
	cert := &certmanagerv1.Certificate{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "api-example-com-tls"},
		Spec: certmanagerv1.CertificateSpec{SecretName: "api-example-com-tls", DNSNames: []string{"api.example.com"},
			IssuerRef: cmmeta.IssuerReference{Name: "letsencrypt-production", Kind: "ClusterIssuer", Group: "cert-manager.io"}}}
	if err := ensure(ctx, c, cert); err != nil {
		return err
	}
	if err := c.Get(ctx, client.ObjectKeyFromObject(cert), cert); err != nil {
		return err
	}
	notBefore, notAfter := metav1.NewTime(time.Now().Add(-24*time.Hour).UTC().Truncate(time.Second)), metav1.NewTime(time.Now().Add(60*24*time.Hour).UTC().Truncate(time.Second))
	cert.Status = certmanagerv1.CertificateStatus{NotBefore: &notBefore, NotAfter: &notAfter, Revision: ptr(1),
		Conditions: []certmanagerv1.CertificateCondition{{Type: certmanagerv1.CertificateConditionReady, Status: cmmeta.ConditionTrue, Reason: "Ready"}}}
	return c.Status().Update(ctx, cert)
}

func s3Bucket(ctx context.Context, c client.Client) error {
	return ensure(ctx, c, &v1.S3Bucket{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "shop-assets"},
		Spec: v1.S3BucketSpec{Name: "shop-assets", Region: "fsn1", ReclaimPolicy: "retain"}})
}

func ptr[T any](v T) *T { return &v }

// cloudWorkloads: what the cloud controller acts on. worker-3 waits for its
// Host to sync, then gets providerID and region; shop-lb gets a load balancer
// instance targeting every node's NodePort, and its address.
func cloudWorkloads(ctx context.Context, c client.Client) error {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "worker-3"}, Spec: corev1.NodeSpec{Taints: []corev1.Taint{
		{Key: "node.cloudprovider.kubernetes.io/uninitialized", Value: "true", Effect: corev1.TaintEffectNoSchedule}}},
		Status: corev1.NodeStatus{Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "10.0.0.13"}},
			Capacity: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("16Gi")}}}
	if err := ensure(ctx, c, n); err != nil {
		return err
	}
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "shop-lb"}, Spec: corev1.ServiceSpec{
		Type: corev1.ServiceTypeLoadBalancer, Selector: map[string]string{"app": "shop"},
		Ports: []corev1.ServicePort{{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP}}}}
	return ensure(ctx, c, svc)
}

// statusPort is the local status server's port (a real target for the checks:
// the demo's Ingress hosts are example domains that do not resolve here).
var statusPort int

// localTargets are two Endpoint CRs the monitoring agent checks for real: one up,
// one answering 503.
func localTargets(ctx context.Context, c client.Client) error {
	// Two host names of one server: an endpoint's API name is made of namespace and host.
	for name, target := range map[string][2]string{"status-ok": {"127.0.0.1", "/healthz"}, "status-down": {"localhost", "/down"}} {
		ep := &v1.Endpoint{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: name},
			Spec: v1.EndpointSpec{RemoteAddress: target[0], RemotePort: int32(statusPort), TLS: ptr(false), Path: target[1], //nolint:gosec // a port
				Timeout: 2, Interval: 5, ExpectedStatusCodes: []int32{200}}}
		if err := ensure(ctx, c, ep); err != nil {
			return err
		}
	}
	return nil
}
