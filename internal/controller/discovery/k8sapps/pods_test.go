package k8sapps

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	v1 "github.com/polycrate/polycrate-operator/api/v1alpha1"
)

func owned(kind string, controller bool) metav1.OwnerReference {
	return metav1.OwnerReference{APIVersion: "apps/v1", Kind: kind, Name: "w", UID: "u", Controller: ptr.To(controller)}
}

func testPod(name string, phase corev1.PodPhase, ready bool, owner *metav1.OwnerReference, images ...string) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", Labels: map[string]string{"pod-template-hash": "abc"}}}
	if owner != nil {
		p.OwnerReferences = []metav1.OwnerReference{*owner}
	}
	p.Status.Phase = phase
	st := corev1.ConditionFalse
	if ready {
		st = corev1.ConditionTrue
	}
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: st}}
	for i, img := range images {
		n := string(rune('a' + i))
		p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: n, Image: img})
		p.Status.ContainerStatuses = append(p.Status.ContainerStatuses, corev1.ContainerStatus{Name: n, Ready: ready, RestartCount: int32(i)})
	}
	return p
}

// TestCounted: only Deployment (via ReplicaSet), StatefulSet and DaemonSet Pods (seed 002).
func TestCounted(t *testing.T) {
	rs, sts, ds := owned("ReplicaSet", true), owned("StatefulSet", true), owned("DaemonSet", true)
	job, cron, notCtl := owned("Job", true), owned("CronJob", true), owned("StatefulSet", false)
	bareRS := testPod("bare-rs", corev1.PodRunning, true, &rs, "x")
	bareRS.Labels = nil
	deleting := testPod("deleting", corev1.PodRunning, true, &sts, "x")
	deleting.DeletionTimestamp = &metav1.Time{}
	cases := []struct {
		pod  *corev1.Pod
		want bool
	}{
		{testPod("deployment", corev1.PodRunning, true, &rs, "x"), true},
		{testPod("statefulset", corev1.PodPending, false, &sts, "x"), true},
		{testPod("daemonset", corev1.PodRunning, true, &ds, "x"), true},
		{testPod("failed-deployment-pod", corev1.PodFailed, false, &rs, "x"), true},
		{testPod("job", corev1.PodRunning, true, &job, "x"), false},
		{testPod("cronjob", corev1.PodRunning, true, &cron, "x"), false},
		{testPod("completed", corev1.PodSucceeded, false, &sts, "x"), false},
		{testPod("bare", corev1.PodRunning, true, nil, "x"), false},
		{testPod("not-controller", corev1.PodRunning, true, &notCtl, "x"), false},
		{bareRS, false},
		{deleting, false},
	}
	for _, c := range cases {
		if got := Counted(c.pod); got != c.want {
			t.Errorf("%s: Counted = %v, want %v", c.pod.Name, got, c.want)
		}
	}
}

// summarize slims the Pods as the PodStore does (dropping the uncounted ones) and
// summarizes them.
func summarize(pods ...*corev1.Pod) Summary {
	var slim []*Pod
	for _, p := range pods {
		if sp, ok := SlimPod(p); ok {
			slim = append(slim, &sp)
		}
	}
	return Summarize(slim)
}

func TestSummarize(t *testing.T) {
	rs, job := owned("ReplicaSet", true), owned("Job", true)
	cases := []struct {
		name  string
		pods  []*corev1.Pod
		total int32
		ready int32
		state string
	}{
		{"no pods", nil, 0, 0, StateWarning},
		{"all ready", []*corev1.Pod{testPod("a", corev1.PodRunning, true, &rs, "x"), testPod("b", corev1.PodRunning, true, &rs, "x")}, 2, 2, StateOK},
		{"some ready", []*corev1.Pod{testPod("a", corev1.PodRunning, true, &rs, "x"), testPod("b", corev1.PodRunning, false, &rs, "x")}, 2, 1, StateWarning},
		{"none ready", []*corev1.Pod{testPod("a", corev1.PodPending, false, &rs, "x")}, 1, 0, StateCritical},
		{"only a job", []*corev1.Pod{testPod("j", corev1.PodRunning, true, &job, "x")}, 0, 0, StateWarning},
	}
	for _, c := range cases {
		s := summarize(c.pods...)
		if s.Total != c.total || s.Ready != c.ready || s.State != c.state || s.Unavailable != s.Total-s.Available {
			t.Errorf("%s: %+v, want total %d ready %d state %s", c.name, s, c.total, c.ready, c.state)
		}
	}
}

// TestArtifacts: each distinct image once, with the number of Pods running it; a
// Pod with the same image in two containers counts once; Job Pods not at all.
func TestArtifacts(t *testing.T) {
	rs, job := owned("ReplicaSet", true), owned("Job", true)
	s := summarize(
		testPod("a", corev1.PodRunning, true, &rs, "cargo.ayedo.cloud/library/nginx:1.25.3", "busybox:1.36"),
		testPod("b", corev1.PodRunning, true, &rs, "cargo.ayedo.cloud/library/nginx:1.25.3", "cargo.ayedo.cloud/library/nginx:1.25.3"),
		testPod("c", corev1.PodRunning, true, &rs, "cargo.ayedo.cloud/library/nginx:1.25.3"),
		testPod("j", corev1.PodRunning, true, &job, "velero/velero:v1.13.0"),
	)
	want := []v1.K8sAppArtifact{
		{Name: "busybox-1-36", Image: "busybox:1.36", PodCount: 1},
		{Name: "cargo-ayedo-cloud-library-nginx-1-25-3", Image: "cargo.ayedo.cloud/library/nginx:1.25.3", PodCount: 3},
	}
	if len(s.Artifacts) != len(want) {
		t.Fatalf("artifacts = %+v", s.Artifacts)
	}
	for i := range want {
		if s.Artifacts[i] != want[i] {
			t.Errorf("artifact %d = %+v, want %+v", i, s.Artifacts[i], want[i])
		}
	}
	if s.Restarts != 1+1 { // a: 0+1, b: 0+1, c: 0
		t.Errorf("restarts = %d", s.Restarts)
	}
}

func TestSummarizeDetailsAndHash(t *testing.T) {
	rs := owned("ReplicaSet", true)
	a, b := testPod("a", corev1.PodRunning, true, &rs, "x"), testPod("b", corev1.PodRunning, true, &rs, "x")
	s1, s2 := summarize(b, a), summarize(a, b)
	if s1.Hash != s2.Hash || s1.Details[0].Name != "a" {
		t.Errorf("details are not ordered: %+v", s1.Details)
	}
	crash := testPod("b", corev1.PodRunning, false, &rs, "x")
	crash.Status.ContainerStatuses[0].State.Waiting = &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}
	crash.Status.ContainerStatuses[0].RestartCount = 7
	s3 := summarize(a, crash)
	if s3.Hash == s1.Hash {
		t.Error("hash did not change with the pod status")
	}
	if d := s3.Details[1]; d.Status != "CrashLoopBackOff" || d.Restarts != 7 || d.Ready || len(d.Containers) != 1 || d.Containers[0].Image != "x" {
		t.Errorf("detail = %+v", d)
	}
}

func TestArtifactName(t *testing.T) {
	for in, want := range map[string]string{
		"cargo.ayedo.cloud/library/nginx:1.25.3": "cargo-ayedo-cloud-library-nginx-1-25-3",
		"nginx":                                  "nginx",
		"Registry:5000/Team/App@sha256:AbC":      "registry-5000-team-app-sha256-abc",
	} {
		if got := ArtifactName(in); got != want {
			t.Errorf("ArtifactName(%q) = %q, want %q", in, got, want)
		}
	}
}
