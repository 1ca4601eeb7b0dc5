package k8sapps

import (
	"fmt"
	"runtime"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// deploymentPod is a Deployment's Pod as the API server sends it: labels,
// annotations (kubectl's last-applied included), env, volumes, statuses.
func deploymentPod(ns string, i int, app string) *corev1.Pod {
	yes := true
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("web-7d9f8c6b5-%05d", i),
		UID:             types.UID(fmt.Sprintf("0000%04d-aaaa-bbbb-cccc-000000000000", i)),
		ResourceVersion: fmt.Sprint(1000 + i),
		Labels:          map[string]string{"app": "web", "pod-template-hash": "7d9f8c6b5", "team": "platform"},
		Annotations:     map[string]string{"prometheus.io/scrape": "true", "kubectl.kubernetes.io/last-applied-configuration": strings.Repeat("x", 1500)},
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web-7d9f8c6b5", UID: "rs-uid", Controller: &yes}}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{
			{Name: "app", Image: "registry.example.com/shop/web:1.4.2", Env: []corev1.EnvVar{{Name: "A", Value: strings.Repeat("v", 200)}}},
			{Name: "sidecar", Image: "registry.example.com/mesh/proxy:2.1"},
		}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.0.0.1",
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}, {Type: corev1.PodScheduled, Status: corev1.ConditionTrue}},
			ContainerStatuses: []corev1.ContainerStatus{{Name: "app", Ready: true, RestartCount: 1, ImageID: "sha256:abc"},
				{Name: "sidecar", Ready: true, ImageID: "sha256:def"}}},
	}
	if app != "" {
		p.Annotations["polycrate_k8sapp_name"] = app
	}
	return p
}

func TestSlimPod(t *testing.T) {
	p := deploymentPod("shop", 1, "shop")
	p.Status.ContainerStatuses[0].State.Waiting = &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}
	s, ok := SlimPod(p)
	if !ok {
		t.Fatal("a Deployment's Pod was dropped")
	}
	if s.Name != p.Name || s.AppName() != "shop" || s.Owner.Kind.Value() != "ReplicaSet" || s.Owner.Name.Value() != "web-7d9f8c6b5" ||
		s.Owner.UID.Value() != "rs-uid" || s.Phase.Value() != corev1.PodRunning || s.Status.Value() != "CrashLoopBackOff" ||
		!s.Ready || s.Restarts != 1 || len(s.Containers) != 2 || s.Containers[1].Image.Value() != "registry.example.com/mesh/proxy:2.1" {
		t.Fatalf("slim = %+v", s)
	}
	job := deploymentPod("shop", 2, "shop")
	job.OwnerReferences[0].Kind = "Job"
	if _, ok := SlimPod(job); ok {
		t.Error("a Job's Pod was kept")
	}
}

// The app index follows annotation changes, namespaces and Pods that stop
// counting.
func TestPodStoreIndex(t *testing.T) {
	ps := newPodStore(nil)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(ps.Add(deploymentPod("a", 1, "shop")))
	must(ps.Add(deploymentPod("a", 2, "shop")))
	must(ps.Add(deploymentPod("b", 1, "shop")))
	must(ps.Add(deploymentPod("b", 2, "")))
	if got := ps.Namespaces("shop"); !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("Namespaces(shop) = %v", got)
	}
	if n := len(ps.List("a", "shop")); n != 2 {
		t.Fatalf("List(a, shop) = %d Pods", n)
	}
	if n := len(ps.List("b", "")); n != 2 {
		t.Fatalf("List(b) = %d Pods", n)
	}
	must(ps.Update(deploymentPod("b", 1, "other"))) // re-annotated
	if got := ps.Namespaces("shop"); !slices.Equal(got, []string{"a"}) {
		t.Fatalf("after re-annotation Namespaces(shop) = %v", got)
	}
	done := deploymentPod("a", 1, "shop")
	done.Status.Phase = corev1.PodSucceeded // stops counting: gone from the store
	must(ps.Update(done))
	must(ps.Delete(deploymentPod("a", 2, "shop")))
	if got := ps.Namespaces("shop"); len(got) != 0 {
		t.Fatalf("Namespaces(shop) = %v after the last Pod went", got)
	}
	if got := ps.Namespaces("other"); !slices.Equal(got, []string{"b"}) {
		t.Fatalf("Namespaces(other) = %v", got)
	}
}

// BenchmarkPodStore reports the heap one counted Pod costs in the PodStore,
// next to the full Pod the API server sends (docs/performance.md).
func BenchmarkPodStore(b *testing.B) {
	const n = 5000
	var stored, full float64
	for i := 0; i < b.N; i++ {
		full = retainedBy(n, func(keep []any) {
			for j := range keep {
				keep[j] = deploymentPod("shop", j, "shop")
			}
		})
		stored = retainedBy(n, func(keep []any) {
			ps := newPodStore(nil)
			for j := 0; j < n; j++ {
				_ = ps.Add(deploymentPod(fmt.Sprintf("ns-%d", j%50), j, fmt.Sprintf("app-%d", j%100)))
			}
			keep[0] = ps
		})
	}
	b.ReportMetric(full, "B/full-pod")
	b.ReportMetric(stored, "B/stored-pod")
}

// retainedBy measures the heap per object that fill keeps alive in keep.
func retainedBy(n int, fill func(keep []any)) float64 {
	keep := make([]any, n)
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	fill(keep)
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(keep)
	return float64(after.HeapAlloc-before.HeapAlloc) / float64(n)
}
