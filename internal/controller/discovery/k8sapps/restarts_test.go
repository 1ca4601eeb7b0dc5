package k8sapps

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/polycrate/polycrate-operator/api/v1alpha1"
)

func restarting(name string, n int32) *Pod { return &Pod{Name: name, Restarts: n} }

func TestRestartsSince(t *testing.T) {
	written := &v1.K8sAppStatus{PodsStatusHash: "h", PodsRestarts: 7}
	for _, tc := range []struct {
		name string
		pods []*Pod
		last map[string]int32
		st   *v1.K8sAppStatus
		want int32
	}{
		{"no restart since the last look", []*Pod{restarting("a", 3), restarting("b", 0)}, map[string]int32{"a": 3, "b": 0}, written, 0},
		{"a Pod restarted twice", []*Pod{restarting("a", 5), restarting("b", 0)}, map[string]int32{"a": 3, "b": 0}, written, 2},
		{"a Pod's first restart", []*Pod{restarting("a", 3), restarting("b", 1)}, map[string]int32{"a": 3, "b": 0}, written, 1},
		{"a Pod seen for the first time is the baseline", []*Pod{restarting("a", 3), restarting("c", 2)}, map[string]int32{"a": 3}, written, 0},
		{"a gone Pod takes nothing away", []*Pod{restarting("b", 0)}, map[string]int32{"a": 3, "b": 0}, written, 0},
		{"a Pod recreated under its name (StatefulSet)", []*Pod{restarting("db-0", 1)}, map[string]int32{"db-0": 9}, written, 1},
		{"no look in this process: what the Pods added to the status's count", []*Pod{restarting("a", 6), restarting("b", 4)}, nil, written, 3},
		{"no look in this process, fewer than the status (Pods replaced): none", []*Pod{restarting("a", 1)}, nil, written, 0},
		{"an app never written: its restarts so far are history", []*Pod{restarting("a", 40)}, nil, &v1.K8sAppStatus{}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := restartsSince(tc.pods, tc.last, tc.st); got != tc.want {
				t.Fatalf("restartsSince = %d, want %d", got, tc.want)
			}
		})
	}
}

func TestRestartWindow(t *testing.T) {
	t0 := time.Date(2026, 12, 5, 10, 0, 0, 0, time.UTC)
	at := func(min, sec int) time.Time {
		return t0.Add(time.Duration(min)*time.Minute + time.Duration(sec)*time.Second)
	}
	bucket := func(min int, n int32) v1.K8sAppRestartBucket {
		return v1.K8sAppRestartBucket{Start: metav1.NewTime(at(min, 0)), Restarts: n}
	}
	var w []v1.K8sAppRestartBucket
	var sum int32
	steps := []struct {
		now   time.Time
		added int32
		want  []v1.K8sAppRestartBucket
		sum   int32
	}{
		{at(0, 30), 0, nil, 0}, // nothing: no bucket
		{at(1, 0), 2, []v1.K8sAppRestartBucket{bucket(0, 2)}, 2},                 // 10:01 → the 10:00 bucket
		{at(4, 59), 1, []v1.K8sAppRestartBucket{bucket(0, 3)}, 3},                // still 10:00
		{at(5, 0), 4, []v1.K8sAppRestartBucket{bucket(0, 3), bucket(5, 4)}, 7},   // a new bucket
		{at(59, 59), 0, []v1.K8sAppRestartBucket{bucket(0, 3), bucket(5, 4)}, 7}, // 10:00 still within the hour
		{at(60, 0), 0, []v1.K8sAppRestartBucket{bucket(5, 4)}, 4},                // 11:00: 10:00's restarts left
		{at(64, 0), 1, []v1.K8sAppRestartBucket{bucket(5, 4), bucket(60, 1)}, 5}, //
		{at(125, 0), 0, nil, 0}, // two hours later: empty
	}
	for i, s := range steps {
		w, sum = advanceWindow(w, s.now, s.added)
		if sum != s.sum || len(w) != len(s.want) {
			t.Fatalf("step %d (%s, +%d): window %v sum %d, want %v sum %d", i, s.now.Format("15:04:05"), s.added, w, sum, s.want, s.sum)
		}
		for j := range w {
			if !w[j].Start.Equal(&s.want[j].Start) || w[j].Restarts != s.want[j].Restarts {
				t.Fatalf("step %d: bucket %d is %v, want %v", i, j, w[j], s.want[j])
			}
		}
	}
	// The window of 12 buckets never exceeds the schema's 13.
	w = nil
	for m := 0; m < 180; m++ {
		w, _ = advanceWindow(w, at(m, 17), 1)
		if len(w) > 13 {
			t.Fatalf("%d buckets at minute %d", len(w), m)
		}
	}
	if d := windowExpiry([]v1.K8sAppRestartBucket{bucket(5, 4)}, at(30, 0)); d != 35*time.Minute+time.Second {
		t.Fatalf("expiry %s, want 35m1s", d)
	}
	if d := windowExpiry(nil, at(30, 0)); d != 0 {
		t.Fatalf("an empty window expires in %s, want never (0)", d)
	}
}
