package kube

import (
	"fmt"
	"runtime"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// realisticPod is a Pod as a Deployment in a busy cluster has it: labels,
// annotations with a last-applied configuration, three containers with env,
// probes, resources and mounts, managedFields and a full status.
func realisticPod(i int) *corev1.Pod {
	p := &corev1.Pod{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{
			Name: fmt.Sprintf("shop-frontend-7d9f8c6b5-%05d", i), Namespace: "shop", UID: "9d1c0f7e-1b7a-4c4e-9f64-3e5a8f6b2c10",
			ResourceVersion: "123456789", Labels: map[string]string{"pod-template-hash": "7d9f8c6b5"},
			Annotations: map[string]string{
				PodAnnotationK8sAppName:                            "shop",
				"kubectl.kubernetes.io/last-applied-configuration": strings.Repeat("x", 3000),
				"prometheus.io/scrape":                             "true", "prometheus.io/port": "9090",
			},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "shop-frontend-7d9f8c6b5",
				UID: "0b3f4a2e-8c1d-4e5f-9a6b-7c8d9e0f1a2b", Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kube-controller-manager", Operation: metav1.ManagedFieldsOperationUpdate,
				APIVersion: "v1", FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(strings.Repeat("f", 6000))}}},
		},
	}
	for k := 0; k < 12; k++ {
		p.Labels[fmt.Sprintf("app.kubernetes.io/label-%d", k)] = fmt.Sprintf("value-%d", k)
	}
	for c := 0; c < 3; c++ {
		ctr := corev1.Container{Name: fmt.Sprintf("container-%d", c), Image: fmt.Sprintf("registry.example.com/shop/frontend-%d:1.2.3", c),
			Args: []string{"--port=8080", "--log-level=info"},
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"),
				corev1.ResourceMemory: resource.MustParse("128Mi")}},
			LivenessProbe:  &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz"}}},
			ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/ready"}}},
			VolumeMounts:   []corev1.VolumeMount{{Name: "config", MountPath: "/etc/shop"}, {Name: "kube-api-access", MountPath: "/var/run/secrets"}}}
		for e := 0; e < 20; e++ {
			ctr.Env = append(ctr.Env, corev1.EnvVar{Name: fmt.Sprintf("SHOP_SETTING_%d", e), Value: fmt.Sprintf("value-of-setting-%d", e)})
		}
		p.Spec.Containers = append(p.Spec.Containers, ctr)
		p.Status.ContainerStatuses = append(p.Status.ContainerStatuses, corev1.ContainerStatus{Name: ctr.Name, Ready: true, RestartCount: 2,
			Image: ctr.Image, ImageID: "registry.example.com/shop/frontend@sha256:" + strings.Repeat("a", 64),
			ContainerID: "containerd://" + strings.Repeat("b", 64), Started: ptr.To(true),
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}})
	}
	p.Spec.Volumes = []corev1.Volume{{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
		LocalObjectReference: corev1.LocalObjectReference{Name: "shop-config"}}}}}
	p.Status.Phase = corev1.PodRunning
	for _, t := range []corev1.PodConditionType{corev1.PodInitialized, corev1.PodReady, corev1.ContainersReady, corev1.PodScheduled} {
		p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: t, Status: corev1.ConditionTrue})
	}
	p.Status.PodIP, p.Status.HostIP = "10.0.0.1", "192.168.0.1"
	return p
}

func TestStripPod(t *testing.T) {
	full := realisticPod(1)
	out, err := StripPod(full)
	if err != nil {
		t.Fatal(err)
	}
	p := out.(*corev1.Pod)
	if p.Name != full.Name || p.Namespace != "shop" || p.UID != full.UID || p.ResourceVersion != full.ResourceVersion {
		t.Errorf("identity lost: %+v", p.ObjectMeta)
	}
	if len(p.Annotations) != 1 || p.Annotations[PodAnnotationK8sAppName] != "shop" {
		t.Errorf("annotations = %v", p.Annotations)
	}
	if len(p.Labels) != 1 || p.Labels[PodLabelTemplateHash] != "7d9f8c6b5" {
		t.Errorf("labels = %v", p.Labels)
	}
	if len(p.OwnerReferences) != 1 || p.ManagedFields != nil {
		t.Errorf("owners %v, managedFields %v", p.OwnerReferences, p.ManagedFields)
	}
	if len(p.Spec.Containers) != 3 || p.Spec.Containers[1].Image != full.Spec.Containers[1].Image || p.Spec.Containers[0].Env != nil ||
		p.Spec.Volumes != nil {
		t.Errorf("spec = %+v", p.Spec)
	}
	if p.Status.Phase != corev1.PodRunning || len(p.Status.Conditions) != 1 || p.Status.Conditions[0].Type != corev1.PodReady ||
		len(p.Status.ContainerStatuses) != 3 || p.Status.ContainerStatuses[0].RestartCount != 2 || !p.Status.ContainerStatuses[0].Ready ||
		p.Status.ContainerStatuses[0].ImageID != "" || p.Status.PodIP != "" {
		t.Errorf("status = %+v", p.Status)
	}
	// A waiting reason survives.
	full.Status.ContainerStatuses[0].State = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff", Message: "long"}}
	out, _ = StripPod(full)
	if w := out.(*corev1.Pod).Status.ContainerStatuses[0].State.Waiting; w == nil || w.Reason != "CrashLoopBackOff" || w.Message != "" {
		t.Errorf("waiting = %+v", w)
	}
	// Anything else passes through.
	if o, _ := StripPod("tombstone"); o != "tombstone" {
		t.Error("non-Pod changed")
	}
}

func TestStripMetadata(t *testing.T) {
	m := &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"}, ObjectMeta: metav1.ObjectMeta{
		Name: "app.poly", Namespace: "ns", ResourceVersion: "7", Labels: map[string]string{"a": "b"},
		Annotations:   map[string]string{"kubectl.kubernetes.io/last-applied-configuration": `{"data":{"password":"c2VjcmV0"}}`},
		ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl"}}}}
	out, _ := StripMetadata(m)
	s := out.(*metav1.PartialObjectMetadata)
	if s.Name != "app.poly" || s.ResourceVersion != "7" || s.Kind != "Secret" || s.Annotations != nil || s.Labels != nil || s.ManagedFields != nil {
		t.Errorf("stripped = %+v", s)
	}
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "x"}}}}
	out, _ = StripMetadata(sec)
	if out.(*corev1.Secret).ManagedFields != nil {
		t.Error("managedFields kept on a typed object")
	}
}

// retained measures the heap n objects made by mk keep alive.
func retained(n int, mk func(i int) any) float64 {
	keep := make([]any, n)
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for i := range keep {
		keep[i] = mk(i)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(keep)
	return float64(after.HeapAlloc-before.HeapAlloc) / float64(n)
}

// BenchmarkStrippedPodCache reports the bytes one Pod costs in the operator's
// cache (after StripPod) next to what the full Pod costs.
func BenchmarkStrippedPodCache(b *testing.B) {
	const n = 2000
	var full, stripped float64
	for i := 0; i < b.N; i++ {
		full = retained(n, func(i int) any { return realisticPod(i) })
		stripped = retained(n, func(i int) any { p, _ := StripPod(realisticPod(i)); return p })
	}
	b.ReportMetric(full, "B/full-pod")
	b.ReportMetric(stripped, "B/cached-pod")
}
