package controller

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestSetConditionReportsTransitions(t *testing.T) {
	var conds []metav1.Condition
	steps := []struct {
		status     metav1.ConditionStatus
		reason     string
		msg        string
		transition bool
		prevReason string
	}{
		{metav1.ConditionTrue, "Synced", "a", true, ""},
		{metav1.ConditionTrue, "Synced", "b", false, "Synced"}, // message only
		{metav1.ConditionFalse, "APIError", "c", true, "Synced"},
		{metav1.ConditionFalse, "APIError", "c", false, "APIError"},
		{metav1.ConditionFalse, "APIUnavailable", "d", true, "APIError"}, // reason only
		{metav1.ConditionTrue, "Synced", "e", true, "APIUnavailable"},
	}
	for i, s := range steps {
		prev, got := SetCondition(&conds, metav1.Condition{Type: "Ready", Status: s.status, Reason: s.reason, Message: s.msg})
		if got != s.transition {
			t.Fatalf("step %d (%s/%s): transition %v, want %v", i, s.status, s.reason, got, s.transition)
		}
		switch {
		case s.prevReason == "" && prev != nil:
			t.Fatalf("step %d: prev %+v, want nil", i, prev)
		case s.prevReason != "" && (prev == nil || prev.Reason != s.prevReason):
			t.Fatalf("step %d: prev %+v, want reason %s (a copy of the old condition, not the updated element)", i, prev, s.prevReason)
		}
	}
	if len(conds) != 1 || conds[0].Message != "e" {
		t.Fatalf("conditions %+v", conds)
	}
}
